package actors

import (
	"errors"
	"slices"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// TestShell_ResumeServesDescribeAgain: a DESCRIBE fails the duplex,
// whose supervisor resumes it; the Resume answers the stream (ERROR of
// kind FailedKind, END). A DESCRIBE is a whole call in one frame, which
// its caller ends with no END: a DESCRIBE sent again on the stream is a
// new call, served, not the answered call's rest, though it carries no
// tool-call id to tell it by.
func TestShell_ResumeServesDescribeAgain(t *testing.T) {
	rt := startRuntimeWith(t, &RuntimeOptions{Supervision: resumeAll()})
	conn, err := rt.Start(Spec{Name: "d", New: func() Logic {
		described := 0
		return LogicFunc(func(c Context, msg any) {
			f, ok := msg.(*messages.Frame)
			if !ok {
				return
			}
			switch f.GetType() {
			case messages.FrameType_DESCRIBE:
				if described++; described == 1 {
					c.Fail(errors.New("boom"))
				}
				c.Emit(&messages.Frame{Type: messages.FrameType_DESCRIPTION, StreamId: f.GetStreamId(), Name: "d"})
				c.Emit(messages.End(f.GetStreamId()))
			case messages.FrameType_TEXT:
				c.Emit(messages.Text(f.GetStreamId(), "echo:"+f.GetText()))
				c.Emit(messages.End(f.GetStreamId()))
			}
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.SendAll(messages.Describe("s"), messages.Describe("s"), messages.Text("g", "probe")); err != nil {
		t.Fatal(err)
	}
	got := onStream(recvUntil(t, conn, "g", "END"), "s")
	want := []string{"s:ERROR(boom)[" + FailedKind + "]", "s:END", "s:DESCRIPTION", "s:END"}
	if !slices.Equal(got, want) {
		t.Errorf("stream s got %q, want %q", got, want)
	}
}
