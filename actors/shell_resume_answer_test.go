package actors

import (
	"slices"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// TestShell_ResumeAnswersTheFailedCall: a duplex whose supervisor
// resumes it after a call failed it. The failed call gets its one answer
// (failures are answers), an ERROR of kind FailedKind with the failure's
// text and END, before the call written after it is served; the duplex
// goes on with the Logic it had.
func TestShell_ResumeAnswersTheFailedCall(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
	rt := closedRuntime(t, &RuntimeOptions{
		Supervision: supervisor.MustNew(&supervisor.Options{Decider: func(error) supervisor.Directive { return supervisor.Resume }}),
	})
	var starts atomic.Int32
	conn, err := rt.Start(failingChild(&starts, nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Send(messages.Text("f", "fail")); err != nil {
		t.Fatal(err)
	}
	if err := conn.Send(messages.Text("g", "other")); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	var got []string
	for len(got) == 0 || got[len(got)-1] != "g:END[]" {
		f, err := conn.Recv(ctx)
		if err != nil {
			t.Fatalf("Recv: %v after %q", err, got)
		}
		got = append(got, f.GetStreamId()+":"+frameName(f)+"["+f.GetMeta().GetFailureKind()+"]")
	}
	want := []string{"f:ERROR(boom)[" + FailedKind + "]", "f:END[]", "g:TEXT(served)[]", "g:END[]"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q: the failed call answered before the next is served", got, want)
	}
	if n := starts.Load(); n != 1 {
		t.Errorf("the Logic was started %d times, want 1 (resumed, not restarted)", n)
	}
}
