package workspace

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// The results marshal to the seed's shapes; additions appear only when set.
func TestResults_SeedShapes(t *testing.T) {
	cases := []struct {
		name string
		res  any
		want string
	}{
		{"listing", ReadFileResult{Success: true, Path: "/ws", IsDirectory: true, Files: []string{"a.md"}, Hint: "h"},
			`{"success":true,"path":"/ws","isDirectory":true,"files":["a.md"],"hint":"h"}`},
		{"empty listing", ReadFileResult{Success: true, Path: "/ws", IsDirectory: true, Hint: "h"},
			`{"success":true,"path":"/ws","isDirectory":true,"files":[],"hint":"h"}`},
		{"file", ReadFileResult{Success: true, Path: "a.md", Content: "x"}, `{"success":true,"path":"a.md","content":"x"}`},
		{"empty file", ReadFileResult{Success: true, Path: "a.md"}, `{"success":true,"path":"a.md","content":""}`},
		{"cut file", ReadFileResult{Success: true, Path: "a.md", Content: "x", Bytes: 9, Truncated: true},
			`{"success":true,"path":"a.md","content":"x","bytes":9,"truncated":true}`},
		{"read failure", ReadFileResult{Path: "../x", Error: "e", Reason: ReasonEscapes}, `{"success":false,"error":"e","path":"../x"}`},
		{"write", WriteFileResult{Success: true, Path: "a.md", Bytes: 3}, `{"success":true,"path":"a.md","bytes":3}`},
		{"empty write", WriteFileResult{Success: true, Path: "a.md"}, `{"success":true,"path":"a.md","bytes":0}`},
		{"write failure", WriteFileResult{Path: "a.md", Error: "e", Reason: ReasonIO}, `{"success":false,"error":"e"}`},
	}
	for _, tc := range cases {
		b, err := json.Marshal(tc.res)
		mustDo(t, err)
		if string(b) != tc.want {
			t.Errorf("%s:\ngot  %s\nwant %s", tc.name, b, tc.want)
		}
	}
}

// The input schemas a binding infers require the seed's fields and carry
// descriptions.
func TestInputs_InferredSchemas(t *testing.T) {
	check := func(name string, s *jsonschema.Schema, err error, required ...string) {
		t.Helper()
		mustDo(t, err)
		if !slices.Equal(s.Required, required) {
			t.Errorf("%s requires %q, want %q", name, s.Required, required)
		}
		for _, r := range required {
			p := s.Properties[r]
			if p == nil || p.Type != "string" || p.Description == "" {
				t.Errorf("%s.%s: %+v", name, r, p)
			}
		}
	}
	s, err := jsonschema.For[ReadFileInput](nil)
	check("read_file", s, err, "path")
	s, err = jsonschema.For[WriteFileInput](nil)
	check("write_file", s, err, "path", "content")
	s, err = jsonschema.For[RunCommandInput](nil)
	check("run_command", s, err, "command")
}
