//go:build linux

package workspace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/workspace/sandbox"
)

// A hidden file with another hard link in the workspace, made from
// outside the tools (ln cfg/.env notes.txt), is never read by a command
// under that name: New fails when the link is there as it opens, and a
// link made since refuses the commands, the one a sandbox was prepared
// for included, saying why and what to do in the workspace's terms,
// until the host removes it. write_file and undo of the hidden path
// make no such link: commands run after them.
func TestHiddenFileWithAnotherLinkRefusesCommands(t *testing.T) {
	requireSandbox(t)
	dir := dirWithHiddenEnv(t)
	env, notes := filepath.Join(dir, "cfg/.env"), filepath.Join(dir, "notes.txt")
	mustDo(t, os.Link(env, notes))
	if ws, err := New(dir, hiddenEnvOptions(dir)); !errors.Is(err, sandbox.ErrHiddenLinked) || !strings.Contains(err.Error(), env) {
		if err == nil {
			ws.Close()
		}
		t.Errorf("New with a hidden file linked elsewhere: %v; want sandbox.ErrHiddenLinked naming %s", err, env)
	}
	mustDo(t, os.Remove(notes))

	ws, err := New(dir, hiddenEnvOptions(dir))
	mustDo(t, err)
	defer ws.Close()
	ctx := context.Background()
	if res, err := ws.WriteFile(ctx, WriteFileInput{Path: "cfg/.env", Content: "NEWSECRET"}); err != nil || !res.Success {
		t.Fatalf("write_file cfg/.env: %+v, %v", res, err)
	}
	mustDo(t, ws.restore(&writeRecord{Path: "cfg/.env", Existed: true, Perm: 0o600, Prev: []byte("OLDSECRET")}))
	if res := runSandboxed(t, ws, "cat cfg/.env; echo ran"); strings.Contains(res.Stdout, "SECRET") || !strings.Contains(res.Stdout, "ran") {
		t.Fatalf("after write_file and undo of the hidden path: %+v; want the command run, the file hidden", res)
	}

	// The next command's sandbox is prepared by now.
	mustDo(t, os.Link(env, notes))
	for range 2 {
		res, err := ws.RunCommand(ctx, RunCommandInput{Command: "cat notes.txt; echo ran"})
		mustDo(t, err)
		if strings.Contains(res.Stdout, "SECRET") || strings.Contains(res.Stdout, "ran") {
			t.Fatalf("a command ran with a hidden file's other link in view: %+v", res)
		}
		if res.Reason != ReasonStartFailed || !strings.Contains(res.Error, "cfg/.env (in the workspace)") ||
			!strings.Contains(res.Error, "hard link") || strings.Contains(res.Error, dir) {
			t.Errorf("the command refused for a hidden file's other link: %+v; want it said in the workspace's terms", res)
		}
	}
	mustDo(t, os.Remove(notes))
	if res := runSandboxed(t, ws, "cat cfg/.env notes.txt; echo ran"); strings.Contains(res.Stdout, "SECRET") || !strings.Contains(res.Stdout, "ran") {
		t.Errorf("once the other link is removed: %+v; want the command run, the file hidden", res)
	}
}
