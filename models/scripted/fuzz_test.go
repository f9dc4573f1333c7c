package scripted

import (
	"testing"
)

// FuzzParse parses arbitrary bytes as a JSON script: Parse never panics,
// and a script it accepts either builds a model or is refused by New with
// an error, never a panic.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"turns":[{"text":"hi"}]}`))
	f.Add([]byte(`{"select":"conversation","turns":[{"tool_calls":[{"id":"a","name":"f","arguments":{"x":1},"split":3}]},{"text":"done"}]}`))
	f.Add([]byte(`{"turns":[{"tool_calls":[{"id":"a","name":"f","chunks":["{\"x\"",":1}"]}],"delay":"5ms"}]}`))
	f.Add([]byte(`{"turns":[{"tool_calls":[{"id":"a","name":"f","arguments":"{","raw":true}]}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			return
		}
		if m, err := New(s, nil); err == nil && m == nil {
			t.Fatal("New returned neither a model nor an error")
		}
	})
}
