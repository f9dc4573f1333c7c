package remote

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// TestServe_DescriptionChecksRoomForStreamID: a description that fits the
// frame limit only without the stream id a DESCRIBE answer carries is
// refused by Serve, instead of going out over the limit.
func TestServe_DescriptionChecksRoomForStreamID(t *testing.T) {
	tool := tools.MustNew(tools.Definition{Name: "echo", Description: strings.Repeat("d", MinFrameBytes), Sync: true})
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

// TestUnknownToolAnswerClipsName: the answer to a call of an unknown
// tool does not repeat a long tool name whole (twice: in the frame and its
// message).
func TestUnknownToolAnswerClipsName(t *testing.T) {
	name := strings.Repeat("ü", 1<<20)
	f := unknownTool(&messages.Frame{Type: messages.FrameType_TOOL_CALL, StreamId: "s", ToolCallId: "c", Name: name})
	if f.GetMeta().GetFailureKind() != string(tools.FailureUnknownTool) || f.GetStreamId() != "s" || f.GetToolCallId() != "c" {
		t.Errorf("answer %v, want an unknown-tool answer to call c of stream s", f.GetMeta())
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
