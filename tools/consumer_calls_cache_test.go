package tools_test

import (
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// TestStreamingRouter_StreamOpenedAgainByTheModelAfterItsEnd: the model
// opens stream s with a TEXT of its own, ends it (an END of no id), and
// opens it again with another TEXT: the runtime keeps s again, inline,
// as the first stream it keeps. The router, whose last stream passed out
// on was s, notes it again too, however it remembers that stream: of the
// quiet streams a and b written next, a is kept inline and b is not, and
// once 1400 quiet streams came after b, the runtime has forgotten b. The
// consumer's call X there then opens it anew, X its sole call, and the
// model's END of X ends the stream for the router as for the runtime:
// call_m, which the model started there, is answered.
func TestStreamingRouter_StreamOpenedAgainByTheModelAfterItsEnd(t *testing.T) {
	conn, got := startEchoRouter(t, sayModel)
	send(t, conn, messages.Meta("s", "say", nil))
	streamUntil(t, conn, "s", isText("said"))
	send(t, conn, messages.End("s")) // the model echoes it: s ends
	streamUntil(t, conn, "s", isEnd)
	send(t, conn, messages.Meta("s", "say", nil))
	streamUntil(t, conn, "s", isText("said"))
	quietStreams(t, conn, "a", "b")
	quietRounds(t, conn, 0, 1400)

	endOfXEndsTheStream(t, conn, got, "b")
}

// TestStreamingRouter_EndOfAnIdClosesAStreamOfNoIdCall: the consumer's
// prompt on stream s, a TEXT of no id, is a call of no id, the stream's
// sole call. The model's END with an id of its own there is that call's
// END, for the runtime, which closes the stream (none of its calls was
// ended by an id): the router takes it so too. call_m, which the model
// started there, is answered (invalid arguments) at once, rather than
// left pending on a stream that is closed.
func TestStreamingRouter_EndOfAnIdClosesAStreamOfNoIdCall(t *testing.T) {
	conn, got := startEchoRouter(t, sayModel)
	send(t, conn, messages.Text("s", "prompt"), messages.Meta("s", "start", nil))
	endEndsCallM(t, conn, got, withCall(messages.Meta("s", "end", nil), "zz"), "the END of zz")
}
