package messages

import (
	"testing"

	"google.golang.org/protobuf/proto"
)

// FuzzFrameDecode decodes arbitrary bytes as a Frame, as a stage reading
// frames off the wire does: decoding never panics, and a frame that
// decodes formats, classifies, clones and re-encodes to a frame equal to
// itself.
func FuzzFrameDecode(f *testing.F) {
	for _, fr := range []*Frame{
		Text("s", "hello"),
		ToolCall("s", "c1", "f", []byte(`{"a":1}`)),
		StreamingToolCall("s", "c2", "g"),
		ToolArgChunk("s", "c2", `{"x"`),
		ToolComplete("s", "c2"),
		RawToolResult("s", "c1", "f", []byte(`{"ok":true}`)),
		ToolError("s", "c1", "f", "failed"),
		Meta("s", "usage", []byte(`{"tokens":3}`)),
		RawParam("s", "messages", []byte(`[]`)),
		Cancel("s", "c1"), Abort("s"), Error("s", "boom"), End("s"),
	} {
		b, err := proto.Marshal(fr)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var fr Frame
		if err := proto.Unmarshal(data, &fr); err != nil {
			return
		}
		_ = Format(&fr)
		_, _ = fr.IsParam("messages"), fr.IsErrorResult()
		_, _, _ = fr.IsToolArgChunk(), fr.IsToolComplete(), fr.IsStreamingToolCall()
		_, _ = fr.RestoreState()
		cp := CloneFrame(&fr)
		if !proto.Equal(cp, &fr) {
			t.Fatalf("clone %v differs from %v", cp, &fr)
		}
		b, err := proto.Marshal(&fr)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		var again Frame
		if err := proto.Unmarshal(b, &again); err != nil || !proto.Equal(&again, &fr) {
			t.Fatalf("re-encoded frame decodes to %v (%v), want %v", &again, err, &fr)
		}
	})
}
