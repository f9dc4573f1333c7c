package remote

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// TestServe_DescriptionChecksRoomForStreamID: a description that fits the
// frame limit only without the stream id a DESCRIBE answer carries is
// refused by Serve, instead of going out over the limit.
func TestServe_DescriptionChecksRoomForStreamID(t *testing.T) {
	tool := tools.MustNew(tools.Definition{Name: "echo", Description: strings.Repeat("d", 1000), Sync: true})
	desc, err := json.Marshal(tool.Description())
	if err != nil {
		t.Fatal(err)
	}
	bare := proto.Size(&messages.Frame{Type: messages.FrameType_DESCRIPTION, Name: tool.Name(), Payload: desc})
	node, err := Serve(&NodeOptions{Address: "127.0.0.1:0", Tools: []*tools.Tool{tool}, MaxFrameBytes: bare})
	if err == nil {
		node.Close(context.Background())
		t.Fatalf("Serve took a description of %d bytes without its stream id under a frame limit of %d", bare, bare)
	}
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Serve: %v, want an error wrapping ErrTooLarge", err)
	}
}

// TestNode_UnknownToolAnswerClipsName: the answer to a call of an unknown
// tool does not repeat a long tool name whole (twice: in the frame and its
// message).
func TestNode_UnknownToolAnswerClipsName(t *testing.T) {
	echo := tools.MustNew(tools.Definition{Name: "echo", Sync: true})
	node, err := Serve(&NodeOptions{Address: "127.0.0.1:0", Tools: []*tools.Tool{echo}})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close(context.Background())
	name := strings.Repeat("ü", 1<<20)
	call := &messages.Frame{Type: messages.FrameType_TOOL_CALL, StreamId: "s", ToolCallId: "c", Name: name}
	r, err := node.System().Root.RequestFuture(node.service, call, 30*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	f, ok := r.(*messages.Frame)
	if !ok {
		t.Fatalf("answer %T, want a frame", r)
	}
	if f.GetMeta().GetFailureKind() != string(tools.FailureUnknownTool) {
		t.Errorf("answer's kind %q, want %q", f.GetMeta().GetFailureKind(), tools.FailureUnknownTool)
	}
	if size := proto.Size(f); size > 4<<10 {
		t.Errorf("answer to a call of a tool named with %d bytes: %d bytes", len(name), size)
	}
	var res messages.ErrorResult
	if err := f.Decode(&res); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Error, "Unknown tool: üü") || !strings.HasSuffix(res.Error, "…") || !utf8Valid(res.Error) || !utf8Valid(f.GetName()) {
		t.Errorf("answer's message %.80q…, want the name clipped at a character", res.Error)
	}
}

func utf8Valid(s string) bool { return utf8.ValidString(s) }
