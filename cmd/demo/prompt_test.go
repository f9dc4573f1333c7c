package main

import (
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/workspace"
)

// TestSystemPrompt_SaysWhatIsTrue: the prompt says commands are
// sandboxed only when the workspace's protections say so, and names the
// tools of -mcp servers as not sandboxed whether or not commands are.
func TestSystemPrompt_SaysWhatIsTrue(t *testing.T) {
	ext, err := tools.New(tools.Definition{Name: "ext_run"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		prot      workspace.Protections
		mcp       []*tools.Tool
		want, not []string
	}{
		{"sandbox", workspace.Protections{Sandbox: true}, nil,
			[]string{"run_command runs commands in a sandbox"}, []string{"not sandboxed", "without a sandbox"}},
		{"no sandbox", workspace.Protections{Missing: []string{"no user namespaces"}}, nil,
			[]string{"without a sandbox"}, []string{"in a sandbox", "sandboxed"}},
		{"sandbox and mcp", workspace.Protections{Sandbox: true}, []*tools.Tool{ext},
			[]string{"run_command runs commands in a sandbox", "ext_run", "not sandboxed"}, nil},
		{"mcp, no sandbox", workspace.Protections{}, []*tools.Tool{ext},
			[]string{"without a sandbox", "ext_run", "not sandboxed"}, []string{"in a sandbox"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := systemPromptFor(c.prot, c.mcp)
			for _, w := range c.want {
				if !strings.Contains(p, w) {
					t.Errorf("the prompt does not say %q: %s", w, p)
				}
			}
			for _, n := range c.not {
				if strings.Contains(p, n) {
					t.Errorf("the prompt says %q: %s", n, p)
				}
			}
		})
	}
}
