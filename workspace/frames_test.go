package workspace_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/workspace"
)

// "<", ">" and "&" reach the model as themselves in the result frames of
// the three tools, not as \u003c escapes.
func TestFrames_NoHTMLEscaping(t *testing.T) {
	dir := t.TempDir()
	rt := actorstest.NewRuntime(t, nil)
	_, j := newJournal(t, dir, memstore.New(nil))
	jt := startJournal(t, rt, j)
	const text = "<b>a && b</b>"
	if err := os.WriteFile(filepath.Join(dir, "a.html"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	results := map[string]string{
		"read_file":  jt.call("s1", "c1", workspace.ReadFileToolName, `{"path":"a.html"}`),
		"write_file": jt.call("s1", "c2", workspace.WriteFileToolName, `{"path":"<b>&.txt","content":"x"}`),
	}
	if runtime.GOOS != "windows" {
		results["run_command"] = jt.call("s1", "c3", workspace.RunCommandToolName, `{"command":"cat a.html"}`)
	}
	want := map[string]string{"read_file": text, "write_file": "<b>&.txt", "run_command": text}
	for tool, got := range results {
		if !strings.Contains(got, want[tool]) || strings.Contains(got, `\u00`) {
			t.Errorf("%s result = %s, want %q as it is", tool, got, want[tool])
		}
	}
}
