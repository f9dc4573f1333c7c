package actors

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// resumeAll is a strategy that resumes every failed duplex.
func resumeAll() *supervisor.Strategy {
	return supervisor.MustNew(&supervisor.Options{Decider: func(error) supervisor.Directive { return supervisor.Resume }})
}

// recvUntil reads conn until a frame named last arrives on stream, and
// returns the frames read as "stream:NAME[failure kind]".
func recvUntil(t *testing.T, conn *Conn, stream, last string) []string {
	t.Helper()
	ctx := testContext(t)
	var got []string
	for len(got) == 0 || got[len(got)-1] != stream+":"+last {
		f, err := conn.Recv(ctx)
		if err != nil {
			t.Fatalf("Recv: %v after %q", err, got)
		}
		name := f.GetStreamId() + ":" + frameName(f)
		if k := f.GetMeta().GetFailureKind(); k != "" {
			name += "[" + k + "]"
		}
		got = append(got, name)
	}
	return got
}

// TestShell_ResumedLogicCannotAnswerFailedCallAgain: a resumed Logic keeps
// its state, the failed call's stream among it, and emits an answer on it
// later. The Resume answered that call (ERROR of kind FailedKind, END):
// the Logic's answer is dropped, the call gets one answer.
func TestShell_ResumedLogicCannotAnswerFailedCallAgain(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
	rt := closedRuntime(t, &RuntimeOptions{Supervision: resumeAll()})
	conn, err := rt.Start(Spec{Name: "d", New: func() Logic {
		var pending string
		return LogicFunc(func(c Context, msg any) {
			f, ok := msg.(*messages.Frame)
			if !ok || f.GetType() != messages.FrameType_TEXT {
				return
			}
			switch f.GetText() {
			case "fail":
				pending = f.GetStreamId()
				c.Fail(errors.New("boom"))
			case "flush":
				c.Emit(messages.Text(pending, "late"))
				c.Emit(messages.End(pending))
				c.Emit(messages.End(f.GetStreamId()))
			}
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Send(messages.Text("f", "fail")); err != nil {
		t.Fatal(err)
	}
	if err := conn.Send(messages.Text("g", "flush")); err != nil {
		t.Fatal(err)
	}
	got := recvUntil(t, conn, "g", "END")
	var onF []string
	for _, g := range got {
		if strings.HasPrefix(g, "f:") {
			onF = append(onF, g)
		}
	}
	if want := []string{"f:ERROR(boom)[" + FailedKind + "]", "f:END"}; !slices.Equal(onF, want) {
		t.Errorf("stream f got %q, want exactly one answer %q", onF, want)
	}
}
