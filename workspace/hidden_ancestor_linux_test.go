//go:build linux

package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/workspace/sandbox"
)

// A path to hide that is an ancestor of the workspace hides what is
// around the workspace, which stays visible in it (sandbox.CheckHide):
// nothing in the workspace is a path to hide for it, and a write through
// a link there is not refused. A path to hide inside still is.
func TestLinkToHidden_AncestorHidesNothingInside(t *testing.T) {
	fx := newFixture(t, &Options{Sandbox: SandboxOff})
	in := func(name string) string { return filepath.Join(fx.ws.dir, name) }
	fx.ws.sandbox = &sandbox.Config{Resolved: []sandbox.HiddenPath{
		{Path: filepath.Dir(fx.ws.dir)}, {Path: filepath.Dir(filepath.Dir(fx.ws.dir))}, {Path: in("cfg/.env")}}}
	t.Cleanup(func() { fx.ws.sandbox = nil })
	mustDo(t, os.Symlink("sub", in("lnk")))
	mustDo(t, os.Symlink("sub", in("cfg"))) // a command's, on the way to cfg/.env

	for _, name := range []string{"good-link.txt", "lnk/a.txt", "lnk/new.txt"} {
		if rf := fx.ws.linkToHidden(name); rf != nil {
			t.Errorf("linkToHidden(%q) with an ancestor of the workspace to hide = %v; want nil", name, rf)
		}
	}
	if rf := fx.ws.linkToHidden("cfg/.env"); rf == nil || rf.reason != ReasonLinkToHidden {
		t.Errorf("linkToHidden(cfg/.env), a path to hide = %v; want refused (%s)", rf, ReasonLinkToHidden)
	}
}

// The same with a real sandbox: with the workspace's parent hidden, a
// command's link in the workspace is written through, and commands see
// what was written (the workspace is not hidden).
func TestWriteFile_ThroughLinkWithAncestorHidden(t *testing.T) {
	requireSandbox(t)
	dir := dirOutsideTmp(t)
	mustDo(t, os.Mkdir(filepath.Join(dir, "ws"), 0o755))
	ws, err := New(filepath.Join(dir, "ws"), &Options{Sandbox: SandboxRequired, HidePaths: []string{dir}})
	mustDo(t, err)
	defer ws.Close()
	runSandboxed(t, ws, "echo old > notes.txt; ln -s notes.txt link.txt")
	res, err := ws.WriteFile(context.Background(), WriteFileInput{Path: "link.txt", Content: "new\n"})
	mustDo(t, err)
	if !res.Success {
		t.Fatalf("write_file through a command's link, the workspace's parent hidden: %+v; want it written", res)
	}
	if out := runSandboxed(t, ws, "cat notes.txt"); strings.TrimSpace(out.Stdout) != "new" {
		t.Errorf("a command reads %q from notes.txt after the write; want %q", out.Stdout, "new\n")
	}
}
