package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// TestOversized_UnmeasuredResultsFit: a result that oversized does not
// measure, because its payload is at most maxUnmeasuredPayload bytes,
// fits in the limit whatever its text is made of. Every character is
// tried as the whole of a payload of that size (each ASCII one, the
// separators that JSON escapes, a byte that is not UTF-8, runes of two,
// three and four bytes), as a result object (sent twice: as text and as
// structuredContent), as an error object with its failure kind, as a
// string and as an array.
func TestOversized_UnmeasuredResultsFit(t *testing.T) {
	const limit = 64 << 10
	n := maxUnmeasuredPayload(limit)
	chars := []string{"\u2028", "\u2029", "\xff", "é", "\ufffd", "😀"}
	for c := 0; c < 128; c++ {
		chars = append(chars, string(rune(c)))
	}
	shapes := []struct {
		name       string
		head, tail string
		isError    bool
	}{
		{"object", `{"s":"`, `"}`, false},
		{"error object", `{"success":false,"error":"no","s":"`, `"}`, true},
		{"string", `"`, `"`, false},
		{"array", `["`, `"]`, false},
	}
	for _, c := range chars {
		unit := encodeUnescaped(t, c)
		for _, sh := range shapes {
			var p bytes.Buffer
			p.WriteString(sh.head)
			for p.Len()+len(unit)+len(sh.tail) <= n {
				p.WriteString(unit)
			}
			for p.Len()+len(sh.tail) < n {
				p.WriteByte('a')
			}
			p.WriteString(sh.tail)
			f := &messages.Frame{Type: messages.FrameType_TOOL_RESULT, Payload: p.Bytes()}
			if sh.isError {
				f.Meta = &messages.Metadata{IsError: true, FailureKind: "invalid_arguments"}
			}
			r := resultOf(f, nil)
			if size := oversized(r, len(f.GetPayload()), limit); size != 0 {
				t.Fatalf("%s of %q: measured (%d bytes) at a payload of %d bytes", sh.name, c, size, len(f.GetPayload()))
			}
			b, err := json.Marshal(r)
			if err != nil {
				continue // go-sdk's to refuse: not sent
			}
			if len(b) > limit {
				t.Errorf("%s of %q: a %d-byte payload is a %d-byte result, over the limit %d, and was not measured",
					sh.name, c, len(f.GetPayload()), len(b), limit)
			}
		}
	}
}

// encodeUnescaped is s as a tool's result holds it in a JSON string:
// encoded without HTML escaping, as tools encode results; a byte that is
// not UTF-8 is kept as it is, as a payload that did not come from
// encoding/json may hold it.
func encodeUnescaped(t *testing.T, s string) string {
	if s == "\xff" {
		return s
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(fmt.Errorf("encode %q: %w", s, err))
	}
	out := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	return string(out[1 : len(out)-1])
}
