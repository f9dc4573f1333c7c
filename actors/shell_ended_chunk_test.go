package actors

import (
	"errors"
	"slices"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// endedCallDuplex is a duplex "d" whose Logic answers a streaming call
// at once, with a TEXT and its END by the call's id, before its
// arguments come (a call it rejects); ignores argument chunks; fails on
// a TEXT "boom"; answers a TEXT "probe" with an END of its stream; and
// leaves any other TEXT open (a prompt).
func endedCallDuplex() Spec {
	return frameDuplex(func(c Context, f *messages.Frame) {
		switch {
		case f.GetType() == messages.FrameType_TOOL_CALL:
			c.Emit(messages.Text(f.GetStreamId(), "no:"+f.GetToolCallId()))
			c.Emit(endOf(f.GetStreamId(), f.GetToolCallId()))
		case f.IsToolArgChunk():
		case f.GetType() == messages.FrameType_TEXT && f.GetText() == "boom":
			c.Fail(errors.New("boom"))
		case f.GetType() == messages.FrameType_TEXT && f.GetText() == "probe":
			c.Emit(messages.End(f.GetStreamId()))
		}
	})
}

// TestShell_EndedCallsChunkOpensNothing: the Logic ends a streaming call
// by its id as soon as its TOOL_CALL comes; the call's argument chunks
// and completion, already on their way, come after. They are of a call
// the Logic answered: they open no call, so the restart that follows
// (the duplex fails on another stream) answers nothing on the call's
// stream, which had its one answer. So also when the stream carries a
// second call, still open, beside the one ended: the restart answers
// that one alone.
func TestShell_EndedCallsChunkOpensNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sends []*messages.Frame
		want  []string
	}{{
		name: "sole call",
		sends: []*messages.Frame{
			messages.StreamingToolCall("s", "c1", "tool"),
			messages.ToolArgChunk("s", "c1", `{"a":`),
			messages.ToolArgChunk("s", "c1", `1}`),
			messages.ToolComplete("s", "c1"),
		},
		want: []string{"s:TEXT(no:c1)", "s:END c1"},
	}, {
		name: "beside an open call",
		sends: []*messages.Frame{
			messages.Text("s", "prompt"), // a call of no id, left open
			messages.StreamingToolCall("s", "c1", "tool"),
			messages.ToolArgChunk("s", "c1", `{}`),
		},
		want: []string{"s:TEXT(no:c1)", "s:END c1", "s:ERROR(boom)", "s:END"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			rt := startRuntime(t)
			conn, err := rt.Start(endedCallDuplex())
			if err != nil {
				t.Fatal(err)
			}
			if err := conn.SendAll(append(tc.sends, messages.Text("g", "boom"))...); err != nil {
				t.Fatal(err)
			}
			got := recvLabeled(t, conn, "g:END", labelWithID)
			// After the restart, a probe: what the restart emitted on s
			// came before its answer.
			if err := conn.Send(messages.Text("p", "probe")); err != nil {
				t.Fatal(err)
			}
			got = append(got, recvLabeled(t, conn, "p:END", labelWithID)...)
			if on := onStream(got, "s"); !slices.Equal(on, tc.want) {
				t.Errorf("stream s got %q, want %q (all: %q)", on, tc.want, got)
			}
		})
	}
}

// labelWithID is frameLabel with the frame's tool-call id, if it
// carries one, after it.
func labelWithID(f *messages.Frame) string {
	if id := f.GetToolCallId(); id != "" {
		return frameLabel(f) + " " + id
	}
	return frameLabel(f)
}
