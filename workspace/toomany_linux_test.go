//go:build linux

package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/workspace/sandbox"
)

// A command that makes more matches of a pattern than a sandbox hides
// stops every later command; the model is told which pattern, how many
// it matches, and that commands cannot mend it. Once the host removes
// the matches (as sandbox.MaxHidden says), commands run again.
func TestTooManyHiddenNamesPatternAndHostRemedy(t *testing.T) {
	requireSandbox(t)
	dir := t.TempDir()
	ws, err := New(dir, &Options{Sandbox: SandboxRequired, HidePaths: []string{filepath.Join(dir, "*.pem")}})
	mustDo(t, err)
	defer ws.Close()
	n := sandbox.MaxHidden + 1
	runSandboxed(t, ws, "i=0; while [ $i -lt "+strconv.Itoa(n)+" ]; do : > f$i.pem; i=$((i+1)); done")
	r, err := ws.RunCommand(context.Background(), RunCommandInput{Command: "echo ran"})
	mustDo(t, err)
	if r.Success || r.Reason != ReasonStartFailed {
		t.Fatalf("with %d matches: %+v", n, r)
	}
	for _, want := range []string{"pattern *.pem (in the workspace) matches " + strconv.Itoa(n), "commands cannot remove them", "by the host"} {
		if !strings.Contains(r.Error, want) {
			t.Errorf("the error does not say %q: %s", want, r.Error)
		}
	}
	// The host-side remedy sandbox.MaxHidden documents.
	matches, err := filepath.Glob(filepath.Join(dir, "*.pem"))
	mustDo(t, err)
	for _, m := range matches {
		mustDo(t, os.Remove(m))
	}
	if r := runSandboxed(t, ws, "echo ran"); !strings.Contains(r.Stdout, "ran") {
		t.Errorf("after the host removed the matches: %+v", r)
	}
}
