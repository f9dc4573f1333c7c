//go:build linux

package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// sharedDirEnv gives the child of TestHiddenPathWrittenByAnotherProcess
// the workspace's directory.
const sharedDirEnv = "POLYWEAVE_WORKSPACE_TEST_SHARED_DIR"

// A command running in one workspace keeps the writes of the paths
// hidden from commands out of every workspace open on its directory:
// another one of the process (two sessions on one folder) is refused
// its write_file and its undo's restore (ReasonHiddenInUse) as the
// command's own workspace is, and the command does not see what it
// would have written. Both run commands at once all the same, and once
// no command runs the other's write goes through.
func TestHiddenPathWrittenByAnotherWorkspaceWhileACommandRuns(t *testing.T) {
	requireSandbox(t)
	dir := t.TempDir()
	mustDo(t, os.Mkdir(filepath.Join(dir, "cfg"), 0o755))
	mustDo(t, os.WriteFile(filepath.Join(dir, "cfg/.env"), []byte("OLDSECRET"), 0o600))
	opts := &Options{Sandbox: SandboxRequired, HidePaths: []string{filepath.Join(dir, "cfg/.env"), filepath.Join(dir, "top.env")}}
	ws, err := New(dir, opts)
	mustDo(t, err)
	defer ws.Close()
	other, err := New(dir, opts)
	mustDo(t, err)
	defer other.Close()

	done := runHeld(t, ws, dir, "cat cfg/.env top.env 2>&1")
	for _, name := range []string{"cfg/.env", "top.env"} {
		res, err := other.WriteFile(context.Background(), WriteFileInput{Path: name, Content: "NEWSECRET"})
		mustDo(t, err)
		if res.Success || res.Reason != ReasonHiddenInUse || !strings.Contains(res.Error, "running") {
			t.Errorf("another workspace's write of %s while a command runs: %+v; want it refused (%s)", name, res, ReasonHiddenInUse)
		}
	}
	if err := other.restore(&writeRecord{Path: "cfg/.env", Existed: true, Perm: 0o600, Prev: []byte("NEWSECRET")}); err == nil {
		t.Errorf("another workspace's undo of cfg/.env while a command runs was not refused")
	}
	if err := other.restore(&writeRecord{Path: "cfg/.env"}); err == nil {
		t.Errorf("another workspace's undo removing cfg/.env while a command runs was not refused")
	}
	// The other workspace's commands run meanwhile.
	if res, err := other.RunCommand(context.Background(), RunCommandInput{Command: "echo alongside"}); err != nil || res.Stdout != "alongside\n" {
		t.Errorf("a command of the other workspace while one runs: %+v, %v", res, err)
	}
	res := endHeld(t, dir, done)
	if out := res.Stdout + res.Stderr; strings.Contains(out, "SECRET") || strings.Contains(out, tempPrefix) {
		t.Errorf("the command saw the hidden path, or a temporary file of it: %q", out)
	}
	if got := readFile(t, filepath.Join(dir, "cfg/.env")); got != "OLDSECRET" {
		t.Errorf("cfg/.env holds %q while the command ran, want it as it was", got)
	}

	for _, name := range []string{"cfg/.env", "top.env"} {
		if res, err := other.WriteFile(context.Background(), WriteFileInput{Path: name, Content: "NEWSECRET"}); err != nil || !res.Success {
			t.Errorf("the other workspace's write of %s once no command runs: %+v, %v", name, res, err)
		}
	}
	if res, err := ws.WriteFile(context.Background(), WriteFileInput{Path: "top.env", Content: "MINE"}); err != nil || !res.Success {
		t.Errorf("the first workspace's write of top.env once no command runs: %+v, %v", res, err)
	}
}

// A command running in a workspace keeps the writes of the paths hidden
// from commands out of a workspace another process opened on its
// directory (a host running several agents on one folder).
func TestHiddenPathWrittenByAnotherProcessWhileACommandRuns(t *testing.T) {
	requireSandbox(t)
	if os.Getenv(childEnv) == t.Name() {
		if res := writeEnvInChild(t, "NEWSECRET"); res.Success || res.Reason != ReasonHiddenInUse || !strings.Contains(res.Error, "running") {
			t.Errorf("another process's write while a command runs: %+v; want it refused (%s)", res, ReasonHiddenInUse)
		}
		return
	}
	dir := dirWithHiddenEnv(t)
	ws, err := New(dir, hiddenEnvOptions(dir))
	mustDo(t, err)
	defer ws.Close()

	done := runHeld(t, ws, dir, "cat cfg/.env 2>&1")
	t.Setenv(sharedDirEnv, dir)
	_, out, childErr := inChild(t, 0)
	res := endHeld(t, dir, done)
	if childErr != nil {
		t.Errorf("the other process: %v\n%s", childErr, out)
	}
	if out := res.Stdout + res.Stderr; strings.Contains(out, "SECRET") || strings.Contains(out, tempPrefix) {
		t.Errorf("the command saw the hidden path, or a temporary file of it: %q", out)
	}
	if got := readFile(t, filepath.Join(dir, "cfg/.env")); got != "OLDSECRET" {
		t.Errorf("cfg/.env holds %q, want it as it was", got)
	}
}

// runHeld starts command in ws once the command has said it is ready
// through the FIFO dir/ready, holding it until endHeld lets it go on.
func runHeld(t *testing.T, ws *Workspace, dir, command string) chan RunCommandResult {
	t.Helper()
	ready, goOn := filepath.Join(dir, "ready"), filepath.Join(dir, "go")
	mustDo(t, syscall.Mkfifo(ready, 0o600))
	mustDo(t, syscall.Mkfifo(goOn, 0o600))
	done := make(chan RunCommandResult, 1)
	go func() {
		res, err := ws.RunCommand(context.Background(), RunCommandInput{Command: "echo r > ready; read x < go; " + command})
		if err != nil {
			res.Error += "; " + err.Error()
		}
		done <- res
	}()
	waitFIFO(t, ready, done)
	return done
}

// endHeld lets the command runHeld started go on and returns its result,
// failing t when it did not run as it should.
func endHeld(t *testing.T, dir string, done chan RunCommandResult) RunCommandResult {
	t.Helper()
	mustDo(t, os.WriteFile(filepath.Join(dir, "go"), []byte("\n"), 0))
	res := <-done
	if !res.Sandboxed || res.Error != "" || res.TimedOut {
		t.Fatalf("the held command did not run as it should: %+v", res)
	}
	return res
}
