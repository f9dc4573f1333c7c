package actors

import (
	"errors"
	"slices"
	"strconv"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// TestShell_ResumedAnsweredCallsBounded: a duplex resumed after each of
// many calls failed it, each call on a stream of its own whose caller
// sends no END (as a remote client's, or a dispatcher's calls come),
// keeps the record of the calls it answered bounded (closedMax streams,
// the oldest forgotten), not one more stream for each call for as long
// as it lives; the newest calls' rest is still dropped.
func TestShell_ResumedAnsweredCallsBounded(t *testing.T) {
	rt := startRuntimeWith(t, &RuntimeOptions{Supervision: resumeAll()})
	conn, err := rt.Start(Spec{Name: "d", New: func() Logic {
		return LogicFunc(func(c Context, msg any) {
			f, ok := msg.(*messages.Frame)
			if !ok {
				return
			}
			switch {
			case f.GetType() == messages.FrameType_TOOL_CALL:
				c.Fail(errors.New("boom"))
			case f.IsToolArgChunk():
				c.Emit(messages.Text(f.GetStreamId(), "got:"+f.GetToolCallId()))
			case f.GetType() == messages.FrameType_TEXT:
				// Read in the Logic's turn, on the actor's goroutine.
				c.Emit(messages.Text(f.GetStreamId(), strconv.Itoa(c.(*shell).answered.len())))
				c.Emit(messages.End(f.GetStreamId()))
			}
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	const calls = closedMax + 10
	frames := make([]*messages.Frame, 0, calls+2)
	for i := range calls {
		id := "s" + strconv.Itoa(i)
		frames = append(frames, messages.ToolCall(id, id, "tool", nil))
	}
	last := "s" + strconv.Itoa(calls-1)
	frames = append(frames, messages.ToolArgChunk(last, last, `{}`), messages.Text("g", "probe"))
	if err := conn.SendAll(frames...); err != nil {
		t.Fatal(err)
	}
	got := recvUntil(t, conn, "g", "END")
	if want := []string{"g:TEXT(" + strconv.Itoa(closedMax) + ")", "g:END"}; !slices.Equal(onStream(got, "g"), want) {
		t.Errorf("the resumed duplex's record of answered calls: got %q, want %q", onStream(got, "g"), want)
	}
	if want := []string{last + ":ERROR(boom)[" + FailedKind + "]", last + ":END"}; !slices.Equal(onStream(got, last), want) {
		t.Errorf("stream %s got %q, want %q (the rest of its answered call dropped)", last, onStream(got, last), want)
	}
}
