//go:build linux

package workspace

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// write_file refuses to write through a symbolic link a command planted
// at a path to hide that did not exist yet, or on the way to one: the
// content would land at the link's target, which commands see. A path
// to hide with no link on the way is written as usual.
func TestWriteFileRefusesLinkAtHiddenPath(t *testing.T) {
	requireSandbox(t)
	dir := t.TempDir()
	ws, err := New(dir, &Options{Sandbox: SandboxRequired, HidePaths: []string{
		filepath.Join(dir, ".env"), filepath.Join(dir, "sec", "key.txt"), filepath.Join(dir, "*.pem")}})
	mustDo(t, err)
	defer ws.Close()
	ctx := context.Background()
	runSandboxed(t, ws, "touch notes.txt notes2.txt; ln -s notes.txt .env; mkdir real; ln -s real sec; ln -s notes2.txt x.pem")
	for _, c := range []struct{ path, link string }{{".env", ".env"}, {"sec/key.txt", "sec"}, {"x.pem", "x.pem"}} {
		res, err := ws.WriteFile(ctx, WriteFileInput{Path: c.path, Content: "SECRET-" + c.path})
		mustDo(t, err)
		if res.Success || res.Reason != ReasonLinkToHidden || !strings.Contains(res.Error, `"`+c.link+`"`) {
			t.Errorf("write_file %s through a command's link: %+v; want it refused (%s), naming %q",
				c.path, res, ReasonLinkToHidden, c.link)
		}
	}
	if res := runSandboxed(t, ws, "cat .env sec/key.txt x.pem notes.txt notes2.txt real/key.txt"); strings.Contains(res.Stdout, "SECRET") {
		t.Errorf("a command read what was written through its links: %q", res.Stdout)
	}
	runSandboxed(t, ws, "rm .env")
	if res, err := ws.WriteFile(ctx, WriteFileInput{Path: ".env", Content: "SECRET-ENV"}); err != nil || !res.Success {
		t.Errorf("write_file .env once the link is gone: %+v, %v", res, err)
	}
	if res := runSandboxed(t, ws, "cat .env"); strings.Contains(res.Stdout, "SECRET") {
		t.Errorf("a command read the hidden file: %q", res.Stdout)
	}
}

// Undo's restore checks the name as write_file does: the content a
// write replaced at a path to hide is not put back through a link a
// command planted on the way since.
func TestRestoreRefusesLinkAtHiddenPath(t *testing.T) {
	requireSandbox(t)
	dir := t.TempDir()
	ws, err := New(dir, &Options{Sandbox: SandboxRequired, HidePaths: []string{filepath.Join(dir, "sec", "key.txt")}})
	mustDo(t, err)
	defer ws.Close()
	runSandboxed(t, ws, "mkdir real; ln -s real sec")
	err = ws.restore(&writeRecord{Path: "sec/key.txt", Existed: true, Perm: 0o600, Prev: []byte("SECRET")})
	if err == nil || !strings.Contains(err.Error(), string(ReasonLinkToHidden)) {
		t.Errorf("restore through a command's link on the way to a hidden path: %v, want it refused", err)
	}
	if res := runSandboxed(t, ws, "cat real/key.txt sec/key.txt"); strings.Contains(res.Stdout, "SECRET") {
		t.Errorf("a command read what undo restored through its link: %q", res.Stdout)
	}
}
