package workspace_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/tools/tooltest"
	"github.com/polyweave/polyweave-go/workspace"
)

// The three tools, bound as typed tools the way a binding would bind them,
// pass the tools conformance suite.
func TestWorkspaceTools_Conformance(t *testing.T) {
	ws, err := workspace.New(t.TempDir(), &workspace.Options{CommandTimeout: 10 * time.Second, KillGrace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })

	cases := []struct {
		tool *tools.Tool
		opts tooltest.Options
	}{
		{
			tools.MustNewTyped(tools.Definition{Name: workspace.ReadFileToolName, Description: workspace.ReadFileDescription}, ws.ReadFile),
			tooltest.Options{
				ValidArgs:   json.RawMessage(`{"path":""}`),
				InvalidArgs: []json.RawMessage{json.RawMessage(`{}`), json.RawMessage(`{"path":7}`)},
			},
		},
		{
			tools.MustNewTyped(tools.Definition{Name: workspace.WriteFileToolName, Description: workspace.WriteFileDescription,
				Capabilities: []string{"write"}}, ws.WriteFile),
			tooltest.Options{
				ValidArgs:   json.RawMessage(`{"path":"notes/a.md","content":"hi"}`),
				InvalidArgs: []json.RawMessage{json.RawMessage(`{"path":"a.md"}`), json.RawMessage(`{"path":"a.md","content":1}`)},
			},
		},
		{
			tools.MustNewTyped(tools.Definition{Name: workspace.RunCommandToolName, Description: workspace.RunCommandDescription,
				Capabilities: []string{"execute"}, Irreversible: true}, ws.RunCommand),
			tooltest.Options{
				ValidArgs:   json.RawMessage(`{"command":"echo hi"}`),
				InvalidArgs: []json.RawMessage{json.RawMessage(`{}`), json.RawMessage(`{"command":["ls"]}`)},
				SlowArgs:    json.RawMessage(`{"command":"sleep 30"}`),
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.tool.Name(), func(t *testing.T) { tooltest.Run(t, tc.tool, &tc.opts) })
	}
}
