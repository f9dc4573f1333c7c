package tools_test

import (
	"fmt"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// TestStreamingRouter_QuietStreamsForgottenAsTheRuntimeForgetsThem: the
// router forgets the quiet streams its runtime forgets, those opened
// longest ago, however lately the consumer wrote on them. Stream s, made
// quiet (the model ended the consumer's call x there alone, its frame of
// no id left), is opened before 1400 others, quiet too, and written on
// again in their midst: the runtime, which keeps the 1024 quiet streams
// opened last, forgets it. The consumer's call X there then opens it
// anew, X its sole call: the model's END of X ends the stream, for the
// runtime and for the router, and call_m, which the model started there,
// is answered (invalid arguments) rather than left pending for an END
// the model, its stream ended, never sends.
func TestStreamingRouter_QuietStreamsForgottenAsTheRuntimeForgetsThem(t *testing.T) {
	conn, got := startEchoRouter(t, startModel)
	quiet := func(streams ...string) {
		frames := make([]*messages.Frame, 0, 3*len(streams))
		for _, s := range streams {
			// The model echoes them: its END of x alone leaves the frame
			// of no id open, and no END of the stream comes.
			frames = append(frames, messages.Text(s, "hi"), withCall(messages.Text(s, "x"), "x"), withCall(messages.End(s), "x"))
		}
		send(t, conn, frames...)
		streamUntil(t, conn, streams[len(streams)-1], isEnd)
	}
	rounds := func(from, to int) {
		const round = 100
		for r := from; r < to; r += round {
			streams := make([]string, 0, round)
			for i := r; i < r+round; i++ {
				streams = append(streams, fmt.Sprint("o", i))
			}
			quiet(streams...)
		}
	}
	quiet("a", "b", "s") // a and b fill the room a runtime keeps streams in beyond its bound
	rounds(0, 1000)
	send(t, conn, messages.Text("s", "again"))
	streamUntil(t, conn, "s", isText("again"))
	rounds(1000, 1400)

	send(t, conn, withCall(messages.Text("s", "X"), "X"), messages.Meta("s", "start", nil))                              // the model starts call_m
	endEndsCallM(t, conn, got, withCall(messages.End("s"), "X"), "the END of X, the stream's sole call for the runtime") // the model echoes it
}
