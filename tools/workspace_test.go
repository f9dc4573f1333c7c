package tools_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/tools/tooltest"
	"github.com/polyweave/polyweave-go/workspace"
)

func TestWorkspaceTools_Conformance(t *testing.T) {
	ws, err := workspace.New(t.TempDir(), &workspace.Options{CommandTimeout: 10 * time.Second, KillGrace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	bound, err := tools.WorkspaceTools(ws)
	if err != nil {
		t.Fatal(err)
	}
	opts := map[string]*tooltest.Options{
		"read_file":   {ValidArgs: json.RawMessage(`{"path":""}`), InvalidArgs: []json.RawMessage{json.RawMessage(`{"path":7}`)}},
		"write_file":  {ValidArgs: json.RawMessage(`{"path":"a.md","content":"hi"}`), InvalidArgs: []json.RawMessage{json.RawMessage(`{"path":"a.md"}`)}},
		"run_command": {ValidArgs: json.RawMessage(`{"command":"echo hi"}`), SlowArgs: json.RawMessage(`{"command":"sleep 30"}`)},
	}
	for _, tool := range bound {
		t.Run(tool.Name(), func(t *testing.T) { tooltest.Run(t, tool, opts[tool.Name()]) })
	}
}
