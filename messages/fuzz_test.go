package messages

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
)

// FuzzFrameDecode decodes arbitrary bytes as a Frame, as a stage reading
// frames off the wire does: decoding never panics, and a frame that
// decodes formats on one line, classifies, clones and re-encodes to a
// frame equal to itself, and reads the same (a seed, built in process,
// too).
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
		restoreFrame([]byte{8, 1}), restoreFrame([]byte{}),
	} {
		b, err := proto.Marshal(fr)
		if err != nil {
			f.Fatal(err)
		}
		var back Frame
		if err := proto.Unmarshal(b, &back); err != nil || reading(&back) != reading(fr) {
			f.Fatalf("seed %s reads %s after its round trip (%v)", reading(fr), reading(&back), err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var fr Frame
		if err := proto.Unmarshal(data, &fr); err != nil {
			return
		}
		if line := Format(&fr); strings.ContainsAny(line, "\n\r\u0085\u2028\u2029") {
			t.Fatalf("Format gave more than one line: %q", line)
		}
		read := reading(&fr)
		cp := CloneFrame(&fr)
		if !proto.Equal(cp, &fr) || reading(cp) != read {
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
		if got := reading(&again); got != read {
			t.Fatalf("re-encoded frame reads %s, want %s", got, read)
		}
	})
}

// restoreFrame is a META restore frame carrying state.
func restoreFrame(state []byte) *Frame {
	f := Meta("s", "restore", nil)
	f.Meta = &Metadata{Durability: &Durability{WrapperId: "w", RestoreState: state}}
	return f
}

// reading is what Format and the readers make of f, in one string. Unlike
// proto.Equal, it tells a nil restore state (no restore frame) from an
// empty one (a restore to no pending calls).
func reading(f *Frame) string {
	state, restore := f.RestoreState()
	return fmt.Sprintf("%s|%v %v %v %v %v|restore=%v %q", Format(f),
		f.IsParam("messages"), f.IsErrorResult(), f.IsToolArgChunk(), f.IsToolComplete(), f.IsStreamingToolCall(),
		restore, state)
}
