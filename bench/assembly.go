package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// Figure 3: streaming argument accumulation. A streaming TOOL_CALL whose
// arguments arrive as 64-byte TEXT chunks (meta.tool_arg_stream), then
// META tool_complete, through tools.Assembler (the accumulation path of
// every router and the loop) and decoded once complete, against a
// strings.Builder fed the same chunks and json.Unmarshal of the result.

// chunkSize is the size of one argument chunk.
const chunkSize = 64

// argDocument is a write_file-like argument object of about size bytes:
// a path and a content string with escapes, as a model would stream it.
func argDocument(size int) string {
	const line = `package main\n\nfunc main() { println(\"hello, \u00e9t\u00e9\") }\n`
	var sb strings.Builder
	sb.WriteString(`{"path":"main.go","content":"`)
	for sb.Len() < size-2 {
		sb.WriteString(line)
	}
	sb.WriteString(`"}`)
	return sb.String()
}

// chunked cuts s into chunkSize pieces.
func chunked(s string) []string {
	out := make([]string, 0, len(s)/chunkSize+1)
	for len(s) > chunkSize {
		out = append(out, s[:chunkSize])
		s = s[chunkSize:]
	}
	return append(out, s)
}

// argStream is one streaming call as the frames a model adapter emits.
type argStream struct {
	size   int
	chunks []string
	frames []*messages.Frame
}

func newArgStream(size int) *argStream {
	doc := argDocument(size)
	st := &argStream{size: len(doc), chunks: chunked(doc)}
	st.frames = append(st.frames, messages.StreamingToolCall("s", "call_1", "write_file"))
	for _, c := range st.chunks {
		st.frames = append(st.frames, messages.ToolArgChunk("s", "call_1", c))
	}
	st.frames = append(st.frames, messages.ToolComplete("s", "call_1"))
	return st
}

// benchAssemble feeds the frames to an Assembler and decodes the call it
// decides to run.
func (st *argStream) benchAssemble(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(st.size))
	for b.Loop() {
		var a tools.Assembler
		ran := 0
		for _, f := range st.frames {
			for _, d := range a.Step(f) {
				if d.Kind != tools.Run {
					b.Fatalf("decision %v", d.Kind)
				}
				var v map[string]any
				if err := json.Unmarshal(d.Frame.GetPayload(), &v); err != nil {
					b.Fatal(err)
				}
				ran++
			}
		}
		if ran != 1 {
			b.Fatalf("%d calls ran", ran)
		}
	}
}

// benchBuilder is the baseline: the same chunks into a strings.Builder,
// then json.Unmarshal.
func (st *argStream) benchBuilder(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(st.size))
	for b.Loop() {
		var sb strings.Builder
		for _, c := range st.chunks {
			sb.WriteString(c)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(sb.String()), &v); err != nil {
			b.Fatal(err)
		}
	}
}
