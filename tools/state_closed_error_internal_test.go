package tools

import (
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// TestAssembler_ErrorOfTheCallThatClosedItsStreamIsASecondEnd: the
// model's END of X, the consumer's sole call on stream s, closes s; the
// model then starts call_m and a call of X's id there. Its ERROR of X
// that follows is judged as a second END of X would be, as the runtime
// takes them: the end of none of the stream's calls, not of the stream.
// Of the calls pending on s, it ends only the one of X's id (answered
// as invalid arguments), and call_m stays pending, its arguments still
// to come.
func TestAssembler_ErrorOfTheCallThatClosedItsStreamIsASecondEnd(t *testing.T) {
	for _, t2 := range []messages.FrameType{messages.FrameType_END, messages.FrameType_ERROR} {
		t.Run(t2.String(), func(t *testing.T) {
			var o consumerCalls
			var a Assembler
			step := func(f *messages.Frame) []Decision {
				e, ds := a.decide(f, o.endsAlone)
				a.Pending.Apply(e)
				return ds
			}
			o.note(opens("s", "X"))
			end := messages.End("s")
			end.ToolCallId = "X"
			o.emitted(end) // X's END closes s
			step(messages.StreamingToolCall("s", "call_m", "record"))
			step(messages.StreamingToolCall("s", "X", "record"))

			f := messages.End("s")
			if t2 == messages.FrameType_ERROR {
				f = messages.Error("s", "X failed")
			}
			f.ToolCallId = "X"
			ds := step(f)
			if len(ds) != 2 || ds[0].Kind != Reject || ds[0].Frame.GetToolCallId() != "X" || ds[1].Kind != Pass {
				t.Fatalf("the model's %s of X, whose END closed s: decisions %v, want X rejected alone, the frame passed", t2, ds)
			}
			if !a.Pending.Has("s", "call_m") || a.Pending.Has("s", "X") {
				t.Fatalf("after the model's %s of X, whose END closed s: call_m pending %t, X pending %t; want call_m alone",
					t2, a.Pending.Has("s", "call_m"), a.Pending.Has("s", "X"))
			}
		})
	}
}
