//go:build linux

package workspace

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/workspace/sandbox"
)

// setList sets *list to v until t's cleanup.
func setList(t *testing.T, list *[]string, v []string) {
	t.Helper()
	saved := *list
	*list = v
	t.Cleanup(func() { *list = saved })
}

// sandbox.DefaultHidden is the program's: a path a program adds to it is
// hidden in its commands' sandboxes (and listed among the protections),
// though the sandbox is set up by a helper process, which reads no
// variable of the program.
func TestSandbox_DefaultHiddenAsTheProgramSetsIt(t *testing.T) {
	requireSandbox(t)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	mustDo(t, err)
	secret := filepath.Join(dir, "secret.txt")
	writeFile(t, secret, "PROGRAM-HIDDEN")
	setList(t, &sandbox.DefaultHidden, append(slices.Clone(sandbox.DefaultHidden), secret))
	ws, err := New(dir, nil)
	mustDo(t, err)
	defer ws.Close()
	if res := runIn(t, ws, "cat secret.txt"); strings.Contains(res.Stdout, "PROGRAM-HIDDEN") {
		t.Errorf("a path the program added to sandbox.DefaultHidden is readable in the sandbox: %+v", res)
	}
	if hidden := ws.Protections().Hidden; !slices.Contains(hidden, secret) {
		t.Errorf("the protections' Hidden %v do not list %s, which the program added to sandbox.DefaultHidden", hidden, secret)
	}
}

// sandbox.ReadableDirs is the program's too: with Landlock, commands read
// beneath a directory a program adds to it, and not beneath one it takes
// out, as the host's own checks (CheckRunnable) already assume.
func TestSandbox_ReadableDirsAsTheProgramSetsThem(t *testing.T) {
	requireFullSandbox(t)
	base := dirOutsideTmp(t)
	tools := filepath.Join(base, "tools")
	mustDo(t, os.Mkdir(tools, 0o755))
	writeFile(t, filepath.Join(tools, "data.txt"), "ADDED-READABLE")
	readable := slices.DeleteFunc(slices.Clone(sandbox.ReadableDirs), func(d string) bool { return d == "/opt" })
	setList(t, &sandbox.ReadableDirs, append(readable, tools))
	// Something in /opt to list, when the system has it.
	optEntry := ""
	if entries, err := os.ReadDir("/opt"); err == nil && len(entries) > 0 {
		optEntry = entries[0].Name()
	}
	ws, err := New(t.TempDir(), nil)
	mustDo(t, err)
	defer ws.Close()
	if res := runIn(t, ws, "cat "+filepath.Join(tools, "data.txt")); !strings.Contains(res.Stdout, "ADDED-READABLE") {
		t.Errorf("a directory the program added to sandbox.ReadableDirs is unreadable in the sandbox: %+v", res)
	}
	if optEntry == "" {
		t.Logf("/opt is empty or missing here: what is taken out of sandbox.ReadableDirs is not checked")
		return
	}
	if res := runIn(t, ws, "ls /opt"); strings.Contains(res.Stdout, optEntry) {
		t.Errorf("/opt, which the program took out of sandbox.ReadableDirs, is readable in the sandbox: %+v", res)
	}
}

// The protections New learnt for a directory and configuration are kept
// for the next Workspace on it only while the lists the program may
// change (sandbox.DefaultHidden, sandbox.ReadableDirs,
// sandbox.EtcLinkDirs) are the same: a path added to DefaultHidden since
// is among the next Workspace's protections, as it is hidden in its
// sandboxes.
func TestNew_ProtectionsLearntAgainWhenTheProgramsListsChange(t *testing.T) {
	requireSandbox(t)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	mustDo(t, err)
	secret := filepath.Join(dir, "secret.txt")
	writeFile(t, secret, "PROGRAM-HIDDEN")
	first, err := New(dir, nil)
	mustDo(t, err)
	first.Close()
	setList(t, &sandbox.DefaultHidden, append(slices.Clone(sandbox.DefaultHidden), secret))
	ws, err := New(dir, nil)
	mustDo(t, err)
	defer ws.Close()
	if hidden := ws.Protections().Hidden; !slices.Contains(hidden, secret) {
		t.Errorf("the protections' Hidden %v, learnt before the program added %s to sandbox.DefaultHidden, do not list it", hidden, secret)
	}
	if res := runIn(t, ws, "cat secret.txt"); strings.Contains(res.Stdout, "PROGRAM-HIDDEN") {
		t.Errorf("a path the program added to sandbox.DefaultHidden is readable in the sandbox: %+v", res)
	}
}
