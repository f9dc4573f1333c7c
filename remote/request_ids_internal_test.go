package remote

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// sendsContext is a context of the node's service actor with a message
// from sender; it keeps what the service sends.
type sendsContext struct {
	nodeContext
	sent *[]any
}

func (c sendsContext) Send(_ *actor.PID, m any) { *c.sent = append(*c.sent, m) }

// Every answer repeats its request's stream id and tool call id: a request
// whose ids are longer than the node's bound is not served, and its one
// answer (of kind KindTooLarge, its ids clipped) stays within the node's
// frame limit, as do the answers to requests with ids at the bound.
func TestNode_AnswersToLongIDsStayWithinFrameLimit(t *testing.T) {
	const limit = 64 << 10
	caller := actor.NewPID("127.0.0.1:7", "caller")
	n, _, _ := holdNode(t)
	n.maxFrame = limit
	longID, boundID := strings.Repeat("i", 4*limit), strings.Repeat("b", maxIDBytes)
	for _, c := range []struct {
		request *messages.Frame
		kind    tools.FailureKind
	}{
		{messages.ToolCall("s", longID, "nosuchtool", json.RawMessage(`{}`)), KindTooLarge},
		{messages.ToolCall(longID, "c", "nosuchtool", json.RawMessage(`{}`)), KindTooLarge},
		{messages.ToolCall("s", longID, "hold", json.RawMessage(`{}`)), KindTooLarge},
		{messages.Describe(longID), KindTooLarge},
		{messages.ToolCall(boundID, boundID, "nosuchtool", json.RawMessage(`{}`)), tools.FailureUnknownTool},
		{messages.ToolCall(boundID, boundID, "hold", json.RawMessage(`{"pad":"`+strings.Repeat("p", limit)+`"}`)), KindTooLarge},
	} {
		var sent []any
		n.receive(sendsContext{nodeContext{messageContext{msg: c.request}, caller}, &sent})
		if len(sent) != 1 {
			t.Fatalf("%v of %q: the node sent %d messages, want its one answer", c.request.GetType(), c.request.GetName(), len(sent))
		}
		f := sent[0].(*messages.Frame)
		if size := proto.Size(f); size > limit {
			t.Errorf("%v of %q (%d bytes): answered with a frame of %d bytes, over the frame limit %d",
				c.request.GetType(), c.request.GetName(), proto.Size(c.request), size, limit)
		}
		if tools.KindOf(f) != c.kind {
			t.Errorf("%v of %q with ids of %d and %d bytes: answer of kind %q, want %q",
				c.request.GetType(), c.request.GetName(), len(c.request.GetStreamId()), len(c.request.GetToolCallId()), tools.KindOf(f), c.kind)
		}
	}
	if got := Routes(n); got != 0 {
		t.Errorf("%d calls routed, want none run", got)
	}
}
