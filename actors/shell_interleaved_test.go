package actors

import (
	"errors"
	"slices"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// TestShell_ResumeKeepsInterleavedCallsChunks: two streaming calls, c1
// and c2, have their arguments interleaved on one stream (as a model's
// parallel tool calls come). A chunk of c2 fails the duplex, whose
// supervisor resumes it: the Resume answers c2 alone (ERROR of kind
// FailedKind, END, both with c2's id). A chunk of c1 still in flight is
// c1's, which goes on: it is delivered, while c2's completion, the rest
// of the answered call, is dropped.
func TestShell_ResumeKeepsInterleavedCallsChunks(t *testing.T) {
	rt := startRuntimeWith(t, &RuntimeOptions{Supervision: resumeAll()})
	conn, err := rt.Start(Spec{Name: "d", New: func() Logic {
		return LogicFunc(func(c Context, msg any) {
			f, ok := msg.(*messages.Frame)
			if !ok {
				return
			}
			switch {
			case f.IsToolArgChunk() && f.GetText() == "boom":
				c.Fail(errors.New("boom"))
			case f.IsToolArgChunk():
				c.Emit(messages.Text(f.GetStreamId(), "got:"+f.GetToolCallId()))
			case f.GetType() == messages.FrameType_TEXT:
				c.Emit(messages.Text(f.GetStreamId(), "echo:"+f.GetText()))
				c.Emit(messages.End(f.GetStreamId()))
			}
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.SendAll(
		messages.StreamingToolCall("s", "c1", "tool"),
		messages.StreamingToolCall("s", "c2", "tool"),
		messages.ToolArgChunk("s", "c1", `{"a":`),
		messages.ToolArgChunk("s", "c2", "boom"),
		messages.ToolArgChunk("s", "c1", `1}`),
		messages.ToolComplete("s", "c1"),
		messages.ToolArgChunk("s", "c2", `1}`),
		messages.ToolComplete("s", "c2"),
		messages.Text("g", "probe"),
	); err != nil {
		t.Fatal(err)
	}
	got := onStream(recvUntil(t, conn, "g", "END"), "s")
	want := []string{"s:TEXT(got:c1)", "s:ERROR(boom)[" + FailedKind + "]", "s:END", "s:TEXT(got:c1)"}
	if !slices.Equal(got, want) {
		t.Errorf("stream s got %q, want %q", got, want)
	}
}
