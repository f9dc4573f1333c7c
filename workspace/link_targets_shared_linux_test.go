//go:build linux

package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The places links led to (sandbox.LinkTargets) are kept per workspace
// directory, not per Workspace: two Workspaces open on one directory
// (two sessions) share them. A command of one plants .env -> notes.txt,
// the host writes .env through it, the first Workspace's next set-up
// hides notes.txt and its command removes the link; the other
// Workspace's commands do not read notes.txt either.
func TestLinkTargetsSharedBetweenWorkspacesOnOneDirectory(t *testing.T) {
	requireSandbox(t)
	dir := t.TempDir()
	opts := func() *Options {
		return &Options{Sandbox: SandboxRequired, HidePaths: []string{filepath.Join(dir, ".env")}}
	}
	w1, err := New(dir, opts())
	mustDo(t, err)
	defer w1.Close()
	w2, err := New(dir, opts())
	mustDo(t, err)
	defer w2.Close()

	r := runSandboxed(t, w1, "touch notes.txt && ln -s notes.txt .env && echo planted")
	if !strings.Contains(r.Stdout, "planted") {
		t.Fatalf("the link: %+v", r)
	}
	// A program of the host writes its secret at .env (os.WriteFile
	// follows the link).
	mustDo(t, os.WriteFile(filepath.Join(dir, ".env"), []byte("SECRET-ENV"), 0o644))
	r = runSandboxed(t, w1, "cat notes.txt 2>&1; rm -f .env && echo removed")
	if strings.Contains(r.Stdout, "SECRET") || !strings.Contains(r.Stdout, "removed") {
		t.Fatalf("w1's second command: %q", r.Stdout)
	}
	r = runSandboxed(t, w1, "cat notes.txt 2>&1; echo ran")
	if strings.Contains(r.Stdout, "SECRET") || !strings.Contains(r.Stdout, "ran") {
		t.Fatalf("w1 shows it: %q", r.Stdout)
	}
	r = runSandboxed(t, w2, "cat notes.txt 2>&1; echo ran")
	if strings.Contains(r.Stdout, "SECRET") || !strings.Contains(r.Stdout, "ran") {
		t.Errorf("a command of a second Workspace on the same directory read what the host wrote through a link the first one's sandboxes hid: %q", r.Stdout)
	}
}

// The host sees the places links led to (Workspace.LinkTargets and
// Protections), and forgets them with ForgetLinkTargets: the next
// command, even one whose sandbox was prepared before, reads the place
// again.
func TestForgetLinkTargetsShowsThePlaceAgain(t *testing.T) {
	requireSandbox(t)
	dir := t.TempDir()
	mustDo(t, os.Mkdir(filepath.Join(dir, "src"), 0o755))
	mustDo(t, os.WriteFile(filepath.Join(dir, "src", "main.go"), []byte("package main // CODE"), 0o644))
	w, err := New(dir, &Options{Sandbox: SandboxRequired, HidePaths: []string{filepath.Join(dir, ".env")}})
	mustDo(t, err)
	defer w.Close()
	src := filepath.Join(w.dir, "src")

	r := runSandboxed(t, w, "ln -s src .env && echo planted")
	if !strings.Contains(r.Stdout, "planted") {
		t.Fatalf("the link: %+v", r)
	}
	r = runSandboxed(t, w, "rm .env && echo removed")
	if !strings.Contains(r.Stdout, "removed") {
		t.Fatalf("the link was not removed: %+v", r)
	}
	if got := w.LinkTargets(); len(got) != 1 || got[0] != src {
		t.Fatalf("LinkTargets = %q, want %q", got, src)
	}
	if got := w.Protections().LinkTargets; len(got) != 1 || got[0] != src {
		t.Errorf("Protections().LinkTargets = %q, want %q", got, src)
	}
	r = runSandboxed(t, w, "cat src/main.go 2>&1; echo ran")
	if strings.Contains(r.Stdout, "CODE") {
		t.Fatalf("src was shown while the set holds it: %q", r.Stdout)
	}
	mustDo(t, w.Warm(t.Context())) // a sandbox prepared while src is in the set
	w.ForgetLinkTargets(src)
	if got := w.LinkTargets(); len(got) != 0 {
		t.Fatalf("LinkTargets after ForgetLinkTargets: %q", got)
	}
	r = runSandboxed(t, w, "cat src/main.go 2>&1; echo ran")
	if !strings.Contains(r.Stdout, "CODE") {
		t.Errorf("src is still hidden after the host forgot it: %q", r.Stdout)
	}
}
