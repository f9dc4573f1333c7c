package tooltest

import (
	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
)

// ScriptedModel returns the spec of a fake model adapter that follows the
// model-adapter contract of package tools. Every frame written into its
// sink is first passed to observe (when not nil; observe runs on the
// actor's goroutine and must not block). At each request END it answers
// with the next response of the script — the n-th request of a stream gets
// responses[n] — with every frame's stream id set to the request's; a
// request beyond the script is answered with ERROR and END. The frames
// given are never changed (copies are sent).
func ScriptedModel(name string, responses [][]*messages.Frame, observe func(*messages.Frame)) actors.Spec {
	return actors.Spec{Name: name, New: func() actors.Logic {
		turns := map[string]int{}
		return actors.LogicFunc(func(c actors.Context, msg any) {
			f, ok := msg.(*messages.Frame)
			if !ok {
				return
			}
			if observe != nil {
				observe(f)
			}
			if f.GetType() != messages.FrameType_END {
				return
			}
			stream := f.GetStreamId()
			n := turns[stream]
			turns[stream] = n + 1
			if n >= len(responses) {
				c.Emit(messages.Error(stream, "scripted model: no response left"))
				c.Emit(messages.End(stream))
				return
			}
			for _, r := range responses[n] {
				out := messages.CloneFrame(r)
				out.StreamId = stream
				c.Emit(out)
			}
		})
	}}
}
