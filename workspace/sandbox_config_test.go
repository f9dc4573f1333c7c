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

// dirOutsideTmp is a new directory, removed after the test, that is not
// beneath /tmp: the sandbox replaces /tmp with a tmpfs of its own, so a
// test of what a sandboxed command sees around its workspace must not
// put the workspace there, wherever TMPDIR points.
func dirOutsideTmp(t *testing.T) string {
	t.Helper()
	if d := t.TempDir(); d != "/tmp" && !strings.HasPrefix(d, "/tmp/") {
		return d
	}
	d, err := os.MkdirTemp("/var/tmp", "pw-test-")
	if err != nil {
		t.Fatalf("a directory outside /tmp: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// requireFullSandbox skips the test where the kernel does not give the
// whole sandbox (what these tests check is the sandbox's).
func requireFullSandbox(t *testing.T) {
	t.Helper()
	ws, err := New(t.TempDir(), nil)
	mustDo(t, err)
	prot := ws.Protections()
	ws.Close()
	if !prot.Complete() {
		t.Skipf("this kernel does not give the full sandbox: %s", prot)
	}
}

func runIn(t *testing.T, ws *Workspace, command string) RunCommandResult {
	t.Helper()
	res, err := ws.RunCommand(context.Background(), RunCommandInput{Command: command})
	mustDo(t, err)
	if !res.Sandboxed {
		t.Fatalf("the command ran unsandboxed: %+v (protections: %s)", res, ws.Protections())
	}
	return res
}

// HidePaths may hold an ancestor of the workspace (the user's home,
// say): the workspace stays visible and writable, the rest of the
// hidden tree does not. A link among HidePaths hides what it points to.
func TestSandbox_HideAncestorAndLinks(t *testing.T) {
	requireFullSandbox(t)
	base := dirOutsideTmp(t)
	home := filepath.Join(base, "home")
	proj := filepath.Join(home, "proj")
	mustDo(t, os.MkdirAll(filepath.Join(proj, "private"), 0o755))
	writeFile(t, filepath.Join(home, "secret.txt"), "HOME-SECRET")
	writeFile(t, filepath.Join(proj, "private", "key.txt"), "PRIVATE-KEY")
	writeFile(t, filepath.Join(proj, "code.txt"), "CODE")
	mustDo(t, os.Symlink(filepath.Join(proj, "private"), filepath.Join(base, "link")))

	ws, err := New(proj, &Options{HidePaths: []string{home, filepath.Join(base, "link")}})
	mustDo(t, err)
	defer ws.Close()
	res := runIn(t, ws, "cat code.txt; echo new > new.txt && echo wrote; cat ../secret.txt "+home+"/secret.txt private/key.txt; ls ..")
	if !strings.Contains(res.Stdout, "CODE") || !strings.Contains(res.Stdout, "wrote") {
		t.Errorf("the workspace is not visible and writable in a hidden ancestor: %+v", res)
	}
	if strings.Contains(res.Stdout, "HOME-SECRET") || strings.Contains(res.Stdout, "PRIVATE-KEY") || strings.Contains(res.Stdout, "secret.txt") {
		t.Errorf("a hidden path is visible: %+v", res)
	}
}

// A configuration the sandbox cannot honour is refused by New, whatever
// the sandbox mode: it is never a reason to run commands unsandboxed.
func TestSandbox_BadHidePathsRefused(t *testing.T) {
	requireFullSandbox(t)
	dir := t.TempDir()
	loop := filepath.Join(t.TempDir(), "loop")
	mustDo(t, os.Symlink(loop, loop))
	for _, hide := range []string{"/", dir, loop} {
		ws, err := New(dir, &Options{HidePaths: []string{hide}})
		if err == nil {
			ws.Close()
			t.Errorf("HidePaths %q: New succeeded", hide)
			continue
		}
		if !errors.Is(err, sandbox.ErrConfig) {
			t.Errorf("HidePaths %q: %v does not say the configuration is wrong", hide, err)
		}
	}
}

// What a sandbox hides depends on where its workspace is: a workspace
// under a hidden path, made after one elsewhere with the same options,
// gets a sandbox of its own that works.
func TestSandbox_ProbePerWorkspace(t *testing.T) {
	requireFullSandbox(t)
	hidden := filepath.Join(dirOutsideTmp(t), "hidden")
	inside := filepath.Join(hidden, "ws")
	mustDo(t, os.MkdirAll(inside, 0o755))
	opts := &Options{HidePaths: []string{hidden}, Sandbox: SandboxRequired}
	for _, dir := range []string{t.TempDir(), inside} {
		ws, err := New(dir, opts)
		mustDo(t, err)
		res := runIn(t, ws, "echo ran")
		ws.Close()
		if res.Stdout != "ran\n" {
			t.Errorf("workspace %s: %+v", dir, res)
		}
	}
}

// A TMPDIR that leads where a sandboxed command cannot write (here
// beneath /var/tmp, read-only in the sandbox) is /tmp in the sandbox:
// temporary files can be made. One in the workspace is kept.
func TestSandbox_TMPDIRWritable(t *testing.T) {
	requireFullSandbox(t)
	t.Setenv("TMPDIR", dirOutsideTmp(t))
	ws, err := New(t.TempDir(), nil)
	mustDo(t, err)
	defer ws.Close()
	res := runIn(t, ws, `f=$(mktemp) && echo made "$f"`)
	if res.ExitCode != 0 || !strings.HasPrefix(res.Stdout, "made /tmp/") {
		t.Errorf("a sandboxed command cannot make a temporary file where its TMPDIR points: %+v", res)
	}
	inside := filepath.Join(ws.Dir(), "tmp")
	mustDo(t, os.Mkdir(inside, 0o755))
	if env := sandboxTMPDIR([]string{"A=1", "TMPDIR=" + inside}, ws.Dir()); env[1] != "TMPDIR="+inside {
		t.Errorf("a TMPDIR in the workspace became %q", env[1])
	}
}

// run_command's description says what sandboxed commands may do as the
// workspace's protections say it: no network only when they have none,
// /dev/shm writable with it.
func TestSandbox_CommandDescriptionFollowsProtections(t *testing.T) {
	requireFullSandbox(t)
	for _, allow := range []bool{false, true} {
		ws, err := New(t.TempDir(), &Options{AllowNetwork: allow})
		mustDo(t, err)
		ts, err := Tools(ws)
		ws.Close()
		mustDo(t, err)
		var d string
		for _, tool := range ts {
			if tool.Name() == RunCommandToolName {
				d = tool.Definition().Description
			}
		}
		if strings.Contains(d, "no network") == allow || !strings.Contains(d, "/dev/shm") || !strings.HasPrefix(d, RunCommandDescription) {
			t.Errorf("network allowed %v: the model reads %q", allow, d)
		}
	}
	ws, err := New(t.TempDir(), &Options{Sandbox: SandboxOff})
	mustDo(t, err)
	defer ws.Close()
	if d := ws.CommandDescription(); d != RunCommandDescription {
		t.Errorf("without a sandbox the model reads %q", d)
	}
}
