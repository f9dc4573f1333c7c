//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A link a command of an earlier opening left at a path to hide, or at
// a pattern's directory (.env -> /usr, sec -> /usr/bin for sec/*),
// leads nowhere as the workspace is opened again when it leads into a
// system directory commands read (see systemPlace): the next sandboxes
// still run programs. A link to a secret kept elsewhere still hides it.
func TestHideResolvedLinksToSystemDirs(t *testing.T) {
	base := dirOutsideTmp(t)
	ws, elsewhere := filepath.Join(base, "ws"), filepath.Join(base, "elsewhere")
	writeFiles(t, elsewhere, "x.key")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{".env": "/usr", "sec": "/usr/bin", "lib": "/lib", "etc": "/etc", "sh": "/bin/sh",
		"owner": "../elsewhere"}
	for link, to := range links {
		if err := os.Symlink(to, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := resolvedConfig(t, ws, filepath.Join(ws, ".env"), filepath.Join(ws, "sec", "*"), filepath.Join(ws, "lib"),
		filepath.Join(ws, "etc", "*"), filepath.Join(ws, "sh"), filepath.Join(ws, "owner", "*.key"))
	owned := false
	for _, hp := range cfg.Resolved {
		if hp.Ino != 0 && !within(hp.Path, base) {
			t.Errorf("a link in the workspace makes %s hidden", hp.Path)
		}
		owned = owned || hp.Path == filepath.Join(elsewhere, "x.key") && hp.Ino != 0
	}
	if !owned {
		t.Errorf("where the link owner led as the workspace was opened is not hidden: %+v", cfg.Resolved)
	}
	// Named as such, a system path is hidden: the configuration says so.
	if r, err := ResolveHide([]string{"/etc/passwd"}, ws); err != nil || len(r) != 1 || r[0].Ino == 0 {
		t.Errorf("ResolveHide(/etc/passwd) = %+v, %v; want it hidden", r, err)
	}
	out, exit := runIn(t, cfg, ws, "ls /usr/bin/ls /etc/passwd && echo ran")
	if !strings.Contains(out, "ran") || exit.Code != 0 {
		t.Errorf("a system directory is hidden: %q %+v", out, exit)
	}
}
