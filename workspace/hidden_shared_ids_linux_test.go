//go:build linux

package workspace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A path hidden from commands that one workspace writes (write_file,
// undo's removal) while no command runs is the tools' own doing for
// every workspace open on the directory in the process, not only for
// the writer: the others' commands run on, with the new file hidden,
// as do those of a workspace opened in between. A replacement from
// outside the tools is still caught by all of them.
func TestHiddenPathWrittenByAnotherWorkspaceKeepsCommandsRunning(t *testing.T) {
	requireSandbox(t)
	dir := dirWithHiddenEnv(t)
	in := func(name string) string { return filepath.Join(dir, name) }
	opts := hiddenEnvOptions(dir)
	open := func() *Workspace {
		ws, err := New(dir, opts)
		mustDo(t, err)
		t.Cleanup(func() { ws.Close() })
		return ws
	}
	a, b := open(), open()
	runs := func(what string, ws *Workspace) {
		t.Helper()
		res, err := ws.RunCommand(context.Background(), RunCommandInput{Command: "cat cfg/.env; echo ran"})
		mustDo(t, err)
		if !res.Sandboxed || !strings.HasSuffix(res.Stdout, "ran\n") || strings.Contains(res.Stdout, "SECRET") {
			t.Errorf("%s: %+v; want it run, the hidden path hidden", what, res)
		}
	}
	write := func(ws *Workspace, content string) {
		t.Helper()
		res, err := ws.WriteFile(context.Background(), WriteFileInput{Path: "cfg/.env", Content: content})
		mustDo(t, err)
		if !res.Success {
			t.Fatalf("write_file cfg/.env with no command running: %+v", res)
		}
	}

	write(b, "NEWSECRET")
	runs("a command of the workspace that did not write cfg/.env, after the other wrote it", a)
	runs("a command of the workspace that wrote cfg/.env", b)
	c := open()
	write(a, "NEWERSECRET")
	write(c, "NEWESTSECRET")
	for name, ws := range map[string]*Workspace{"a": a, "b": b, "c (opened between the writes)": c} {
		runs("a command of workspace "+name+" after the others' writes", ws)
	}
	// From outside the tools: the file is moved where commands see it,
	// another put in its place. Put back, it is hidden again.
	mustDo(t, os.Rename(in("cfg/.env"), in("seen.txt")))
	mustDo(t, os.WriteFile(in("cfg/.env"), []byte("PLANTED"), 0o600))
	for name, ws := range map[string]*Workspace{"a": a, "b": b, "c": c} {
		res, err := ws.RunCommand(context.Background(), RunCommandInput{Command: "cat seen.txt"})
		mustDo(t, err)
		if res.Success || res.Sandboxed || !strings.Contains(res.Error, "moved or replaced") {
			t.Errorf("a command of workspace %s once cfg/.env was replaced from outside: %+v; want it refused", name, res)
		}
	}
	mustDo(t, os.Rename(in("seen.txt"), in("cfg/.env")))
	runs("a command of a workspace once cfg/.env was put back", a)

	if err := b.restore(&writeRecord{Path: "cfg/.env"}); err != nil {
		t.Fatalf("undo's removal of cfg/.env with no command running: %v", err)
	}
	runs("a command of a workspace after another's undo removed cfg/.env", a)
	write(c, "AGAIN")
	for name, ws := range map[string]*Workspace{"a": a, "b": b, "c": c} {
		runs("a command of workspace "+name+" after another's undo removed cfg/.env and one wrote it again", ws)
	}
}

// The same across processes: a write of a path hidden from commands by
// a workspace another process opened on the directory (a host running
// several agents on one folder) does not stop this process's commands.
func TestHiddenPathWrittenByAnotherProcessKeepsCommandsRunning(t *testing.T) {
	requireSandbox(t)
	if os.Getenv(childEnv) == t.Name() {
		if res := writeEnvInChild(t, os.Getenv(sharedContentEnv)); !res.Success {
			t.Errorf("the other process's write with no command running: %+v", res)
		}
		return
	}
	dir := dirWithHiddenEnv(t)
	// The note that tells the other process's write from a move is an
	// extended attribute of the file written.
	requireUserXattrs(t, dir)
	ws, err := New(dir, hiddenEnvOptions(dir))
	mustDo(t, err)
	defer ws.Close()
	t.Setenv(sharedDirEnv, dir)
	for _, content := range []string{"NEWSECRET", "NEWERSECRET"} {
		t.Setenv(sharedContentEnv, content)
		if _, out, err := inChild(t, 0); err != nil {
			t.Fatalf("the other process: %v\n%s", err, out)
		}
		if got := readFile(t, filepath.Join(dir, "cfg/.env")); got != content {
			t.Fatalf("cfg/.env after the other process's write: %q, want %q", got, content)
		}
		res, err := ws.RunCommand(context.Background(), RunCommandInput{Command: "cat cfg/.env; echo ran"})
		mustDo(t, err)
		if !res.Sandboxed || !strings.HasSuffix(res.Stdout, "ran\n") || strings.Contains(res.Stdout, "SECRET") {
			t.Errorf("a command after another process wrote cfg/.env (%s): %+v; want it run, the path hidden", content, res)
		}
	}
}

// requireUserXattrs skips t when the file system of dir has no user
// extended attributes, which the notes of the tools' writes of hidden
// paths are (replacedAttr).
func requireUserXattrs(t *testing.T, dir string) {
	t.Helper()
	probe := filepath.Join(dir, "probe.txt")
	mustDo(t, os.WriteFile(probe, nil, 0o600))
	if err := unix.Setxattr(probe, replacedAttr, []byte("1:1:1"), 0); errors.Is(err, unix.ENOTSUP) {
		t.Skipf("the file system of %s has no user extended attributes: %v", dir, err)
	} else {
		mustDo(t, err)
	}
	mustDo(t, os.Remove(probe))
}

// sharedContentEnv gives the child of
// TestHiddenPathWrittenByAnotherProcessKeepsCommandsRunning what to
// write.
const sharedContentEnv = "POLYWEAVE_WORKSPACE_TEST_SHARED_CONTENT"

// dirWithHiddenEnv is a new directory holding cfg/.env, the file
// hiddenEnvOptions hides.
func dirWithHiddenEnv(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	mustDo(t, os.Mkdir(filepath.Join(dir, "cfg"), 0o755))
	mustDo(t, os.WriteFile(filepath.Join(dir, "cfg/.env"), []byte("OLDSECRET"), 0o600))
	return dir
}

// hiddenEnvOptions are the options of a workspace on dir that must
// sandbox its commands and hides cfg/.env from them.
func hiddenEnvOptions(dir string) *Options {
	return &Options{Sandbox: SandboxRequired, HidePaths: []string{filepath.Join(dir, "cfg/.env")}}
}

// writeEnvInChild is what the child process of a test of two processes
// on one folder does: it opens a workspace on the directory
// sharedDirEnv names, hiding cfg/.env, and writes content there.
func writeEnvInChild(t *testing.T, content string) WriteFileResult {
	t.Helper()
	dir := os.Getenv(sharedDirEnv)
	other, err := New(dir, hiddenEnvOptions(dir))
	mustDo(t, err)
	defer other.Close()
	res, err := other.WriteFile(context.Background(), WriteFileInput{Path: "cfg/.env", Content: content})
	mustDo(t, err)
	return res
}
