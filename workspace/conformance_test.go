package workspace_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/tools/tooltest"
	"github.com/polyweave/polyweave-go/workspace"
)

// The three tools, as Tools binds them for routers and
// loops, pass the tools conformance suite.
func TestTools_Conformance(t *testing.T) {
	ws, err := workspace.New(t.TempDir(), &workspace.Options{CommandTimeout: 10 * time.Second, KillGrace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	bound, err := workspace.Tools(ws)
	if err != nil {
		t.Fatal(err)
	}
	opts := map[string]*tooltest.Options{
		workspace.ReadFileToolName: {
			ValidArgs:   json.RawMessage(`{"path":""}`),
			InvalidArgs: []json.RawMessage{json.RawMessage(`{}`), json.RawMessage(`{"path":7}`)},
		},
		workspace.WriteFileToolName: {
			ValidArgs:   json.RawMessage(`{"path":"notes/a.md","content":"hi"}`),
			InvalidArgs: []json.RawMessage{json.RawMessage(`{"path":"a.md"}`), json.RawMessage(`{"path":"a.md","content":1}`)},
		},
		workspace.RunCommandToolName: {
			ValidArgs:   json.RawMessage(`{"command":"echo hi"}`),
			InvalidArgs: []json.RawMessage{json.RawMessage(`{}`), json.RawMessage(`{"command":["ls"]}`)},
			SlowArgs:    json.RawMessage(`{"command":"sleep 30"}`),
		},
	}
	if len(bound) != len(opts) {
		t.Fatalf("Tools bound %d tools, want %d", len(bound), len(opts))
	}
	for _, tool := range bound {
		o, ok := opts[tool.Name()]
		if !ok {
			t.Fatalf("unexpected tool %q", tool.Name())
		}
		t.Run(tool.Name(), func(t *testing.T) { tooltest.Run(t, tool, o) })
	}
}
