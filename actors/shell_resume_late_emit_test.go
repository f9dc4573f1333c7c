package actors

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/messages"
)

// resumedLateEmit runs a duplex that fails on TEXT "fail" (or on the END of a
// stream named "e"), remembers that stream, and on TEXT "flush" emits a
// late answer on it; sends, then returns the frames the failed stream got.
func resumedLateEmit(t *testing.T, sends []*messages.Frame, failed string) []string {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
	rt := closedRuntime(t, &RuntimeOptions{Supervision: resumeAll()})
	conn, err := rt.Start(Spec{Name: "d", New: func() Logic {
		var pending string
		return LogicFunc(func(c Context, msg any) {
			f, ok := msg.(*messages.Frame)
			if !ok {
				return
			}
			if f.GetType() == messages.FrameType_END && f.GetStreamId() == "e" {
				pending = "e"
				c.Fail(errors.New("boom"))
			}
			if f.GetType() != messages.FrameType_TEXT {
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
	for _, f := range sends {
		if err := conn.Send(f); err != nil {
			t.Fatal(err)
		}
	}
	got := recvUntil(t, conn, "g", "END")
	var on []string
	for _, g := range got {
		if strings.HasPrefix(g, failed+":") {
			on = append(on, g)
		}
	}
	return on
}

// TestShell_ResumedLogicLateEmitAfterCallersEnd: the caller ends the failed
// call (END) before the resumed Logic emits its late answer on it: the
// Resume answered the call, the Logic's answer is dropped.
func TestShell_ResumedLogicLateEmitAfterCallersEnd(t *testing.T) {
	on := resumedLateEmit(t, []*messages.Frame{
		messages.Text("f", "fail"), messages.End("f"), messages.Text("g", "flush"),
	}, "f")
	if want := []string{"f:ERROR(boom)[" + FailedKind + "]", "f:END"}; !slices.Equal(on, want) {
		t.Errorf("stream f got %q, want exactly one answer %q", on, want)
	}
}

// TestShell_ResumedLogicLateEmitWhenEndFailed: the frame that fails the
// duplex is the caller's END itself; the Logic's late answer is dropped.
func TestShell_ResumedLogicLateEmitWhenEndFailed(t *testing.T) {
	on := resumedLateEmit(t, []*messages.Frame{
		messages.Text("e", "work"), messages.End("e"), messages.Text("g", "flush"),
	}, "e")
	if want := []string{"e:ERROR(boom)[" + FailedKind + "]", "e:END"}; !slices.Equal(on, want) {
		t.Errorf("stream e got %q, want exactly one answer %q", on, want)
	}
}

// TestShell_ResumedCallEndsAtCallersEnd: a call is the frames of its
// stream up to the caller's END, as for calls an incarnation's end closed
// (see shell.late). A caller that gets the Resume's answer (ERROR, END)
// and sends more on the stream before its END sends the answered call's
// rest: dropped, no second answer. A call opened after the caller's END
// is a new call, which the Logic answers, though it never ended the
// failed call itself.
func TestShell_ResumedCallEndsAtCallersEnd(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
	rt := closedRuntime(t, &RuntimeOptions{Supervision: resumeAll()})
	conn, err := rt.Start(Spec{Name: "d", New: func() Logic {
		return LogicFunc(func(c Context, msg any) {
			f, ok := msg.(*messages.Frame)
			if !ok || f.GetType() != messages.FrameType_TEXT {
				return
			}
			if f.GetText() == "fail" {
				c.Fail(errors.New("boom"))
			}
			c.Emit(messages.Text(f.GetStreamId(), "echo:"+f.GetText()))
			c.Emit(messages.End(f.GetStreamId()))
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	mustSend := func(f *messages.Frame) {
		if err := conn.Send(f); err != nil {
			t.Fatal(err)
		}
	}
	mustSend(messages.Text("f", "fail"))
	got := recvUntil(t, conn, "f", "END")
	for _, f := range []*messages.Frame{
		messages.Text("f", "again"), messages.End("f"), // the answered call's rest
		messages.Text("f", "new"), messages.End("f"), // a new call
		messages.Text("g", "probe"), messages.End("g"),
	} {
		mustSend(f)
	}
	got = append(got, recvUntil(t, conn, "g", "END")...)
	var onF []string
	for _, g := range got {
		if strings.HasPrefix(g, "f:") {
			onF = append(onF, g)
		}
	}
	want := []string{"f:ERROR(boom)[" + FailedKind + "]", "f:END", "f:TEXT(echo:new)", "f:END"}
	if !slices.Equal(onF, want) {
		t.Errorf("stream f got %q, want %q", onF, want)
	}
}
