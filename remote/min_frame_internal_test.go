package remote

import (
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// TestMinFrameBytesHoldsTheProtocolsAnswers: the answers a node makes
// itself, at their largest (ids at the bound, the longest tool name, a
// caller's tool name of any length), fit in MinFrameBytes, and so does
// the description of a small tool with the room Serve keeps for a
// DESCRIBE's stream id.
func TestMinFrameBytesHoldsTheProtocolsAnswers(t *testing.T) {
	id, name, long := strings.Repeat("i", maxIDBytes), strings.Repeat("n", 64), strings.Repeat("ü", 1<<16)
	key := callKey{id, id}
	tool := tools.MustNew(tools.Definition{Name: name, Description: "Echoes its arguments."})
	desc, err := json.Marshal(tool.Description())
	if err != nil {
		t.Fatal(err)
	}
	for what, f := range map[string]*messages.Frame{
		"unknown tool":     unknownTool(messages.ToolCall(id, id, long, json.RawMessage(`{}`))),
		"ids too long":     idsTooLong(messages.ToolCall(long, long, long, json.RawMessage(`{}`))),
		"call too large":   tooLarge(key, name, "Tool "+name+" was not run: its arguments are too large for this node: a call of 67108864 bytes, limit 67043328"),
		"result too large": tooLarge(key, name, "Tool "+name+" ran, but its result is too large to send: 67108864 bytes, limit 67043328"),
		"connection lost":  connectionLost(key, name),
		"description":      {Type: messages.FrameType_DESCRIPTION, StreamId: describeStreamRoom, Name: name, Payload: desc},
	} {
		if n := proto.Size(f); n > MinFrameBytes {
			t.Errorf("%s: %d bytes, over MinFrameBytes (%d)", what, n, MinFrameBytes)
		}
	}
}
