//go:build linux

package workspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/polyweave/polyweave-go/workspace/sandbox"
)

// A directory of sandbox.EtcLinkDirs that someone besides root could
// plant a link in (where the link leads becomes readable to commands),
// or that commands could (it is in the workspace), is refused as the
// sandbox is set up, by name, rather than followed. Run as a user other
// than root, the test's temporary directory on the way is that user's,
// and the refusal says so first (see ownDirRefusal).
func TestSandbox_EtcLinkDirNotTrustedRefused(t *testing.T) {
	requireSandbox(t)
	for _, c := range []struct {
		name string
		// make returns the directory to list in EtcLinkDirs, given the
		// workspace's directory, and what the error must say of it.
		make func(t *testing.T, ws string) (string, string)
	}{
		{"writable by others", func(t *testing.T, _ string) (string, string) {
			d := filepath.Join(t.TempDir(), "etc")
			mustDo(t, os.Mkdir(d, 0o755))
			mustDo(t, os.Chmod(d, 0o757))
			return d, "writable by its group or others"
		}},
		{"writable by its group", func(t *testing.T, _ string) (string, string) {
			d := filepath.Join(t.TempDir(), "etc")
			mustDo(t, os.Mkdir(d, 0o755))
			mustDo(t, os.Chmod(d, 0o775))
			return d, "writable by its group or others"
		}},
		{"owned by another user", func(t *testing.T, _ string) (string, string) {
			if os.Geteuid() != 0 {
				t.Skip("giving a directory to another user needs root")
			}
			d := filepath.Join(t.TempDir(), "etc")
			mustDo(t, os.Mkdir(d, 0o755))
			mustDo(t, os.Chown(d, 12345, 12345))
			return d, "owned by uid 12345"
		}},
		{"owned by nobody", func(t *testing.T, _ string) (string, string) {
			// Outside a user namespace, or in one that maps it, 65534
			// is a user of its own (nobody), which daemons run as.
			if os.Geteuid() != 0 {
				t.Skip("giving a directory to another user needs root")
			}
			d := filepath.Join(t.TempDir(), "etc")
			mustDo(t, os.Mkdir(d, 0o755))
			if err := os.Chown(d, 65534, 65534); errors.Is(err, syscall.EINVAL) {
				t.Skip("uid 65534 has no mapping in this user namespace: it stands for users outside it")
			} else {
				mustDo(t, err)
			}
			return d, "owned by uid 65534"
		}},
		{"in a directory others may write", func(t *testing.T, _ string) (string, string) {
			// Anyone may rename it away and put a directory of theirs
			// in its place, once it was checked.
			open := filepath.Join(t.TempDir(), "open")
			mustDo(t, os.Mkdir(open, 0o755))
			mustDo(t, os.Chmod(open, 0o777))
			d := filepath.Join(open, "etc")
			mustDo(t, os.Mkdir(d, 0o755))
			return d, "reached through " + open + ", which its group or others may write"
		}},
		{"a link in a directory others may write", func(t *testing.T, _ string) (string, string) {
			open := filepath.Join(t.TempDir(), "open")
			mustDo(t, os.Mkdir(open, 0o755))
			mustDo(t, os.Chmod(open, 0o777))
			d := filepath.Join(open, "etc")
			mustDo(t, os.Symlink("/etc", d))
			return d, "reached through " + open + ", which its group or others may write"
		}},
		{"a link to a directory in one others may write", func(t *testing.T, _ string) (string, string) {
			base := t.TempDir()
			open := filepath.Join(base, "open")
			mustDo(t, os.Mkdir(open, 0o755))
			mustDo(t, os.Chmod(open, 0o777))
			mustDo(t, os.Mkdir(filepath.Join(open, "etc"), 0o755))
			d := filepath.Join(base, "etc")
			mustDo(t, os.Symlink(filepath.Join(open, "etc"), d))
			return d, "reached through " + open + ", which its group or others may write"
		}},
		{"missing from a directory others may add to", func(t *testing.T, _ string) (string, string) {
			// Sticky, as /tmp: no one may rename what others own there,
			// but anyone may make what is missing.
			open := filepath.Join(t.TempDir(), "open")
			mustDo(t, os.Mkdir(open, 0o755))
			mustDo(t, os.Chmod(open, 0o777|os.ModeSticky))
			return filepath.Join(open, "etc"), "missing from " + open + ", where its group or others may make it"
		}},
		{"in a sticky directory, on the way, owned by another user", func(t *testing.T, _ string) (string, string) {
			if os.Geteuid() != 0 {
				t.Skip("giving a directory to another user needs root")
			}
			open := filepath.Join(t.TempDir(), "open")
			mustDo(t, os.Mkdir(open, 0o755))
			mustDo(t, os.Chmod(open, 0o777|os.ModeSticky))
			mid := filepath.Join(open, "mid")
			mustDo(t, os.Mkdir(mid, 0o755))
			d := filepath.Join(mid, "etc")
			mustDo(t, os.Mkdir(d, 0o755))
			mustDo(t, os.Chown(mid, 12345, 12345))
			return d, "reached through " + mid + ", owned by uid 12345"
		}},
		{"in the workspace", func(t *testing.T, ws string) (string, string) {
			d := filepath.Join(ws, "etc")
			mustDo(t, os.Mkdir(d, 0o755))
			return d, "in the workspace"
		}},
		{"relative", func(t *testing.T, _ string) (string, string) { return "etc", "not absolute" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws := t.TempDir()
			dir, says := c.make(t, ws)
			if own := ownDirRefusal(); own != "" && filepath.IsAbs(dir) {
				says = own
			}
			saved := sandbox.EtcLinkDirs
			sandbox.EtcLinkDirs = append([]string{"/etc"}, dir)
			t.Cleanup(func() { sandbox.EtcLinkDirs = saved })
			w, err := New(ws, &Options{Sandbox: SandboxAuto})
			if err == nil {
				w.Close()
				t.Fatalf("New with %s in EtcLinkDirs succeeded", dir)
			}
			if !errors.Is(err, sandbox.ErrConfig) || !strings.Contains(err.Error(), dir) ||
				!strings.Contains(err.Error(), "EtcLinkDirs") || !strings.Contains(err.Error(), says) {
				t.Errorf("New: %v; want ErrConfig naming EtcLinkDirs, %s, and that it is %s", err, dir, says)
			}
		})
	}
}

// A directory of sandbox.EtcLinkDirs in a sticky directory that anyone
// may add to (as /tmp or /var/tmp), owned by root and writable by it
// alone, is taken: no one else may rename it or what leads to it.
func TestSandbox_EtcLinkDirInAStickyDirectoryTaken(t *testing.T) {
	requireSandbox(t)
	requireRootForOwnEtcLinkDir(t)
	open := filepath.Join(t.TempDir(), "open")
	mustDo(t, os.Mkdir(open, 0o755))
	mustDo(t, os.Chmod(open, 0o777|os.ModeSticky))
	dir := filepath.Join(open, "etc")
	mustDo(t, os.Mkdir(dir, 0o755))
	saved := sandbox.EtcLinkDirs
	sandbox.EtcLinkDirs = []string{"/etc", dir, filepath.Join(open, "link"), "/etc/missing"}
	t.Cleanup(func() { sandbox.EtcLinkDirs = saved })
	mustDo(t, os.Symlink("etc", filepath.Join(open, "link")))
	w, err := New(t.TempDir(), &Options{Sandbox: SandboxAuto})
	if err != nil {
		t.Fatalf("New with %s, trusted, in EtcLinkDirs: %v", dir, err)
	}
	mustDo(t, w.Close())
}

// A directory of sandbox.EtcLinkDirs whose path loops through links is
// refused as the set-up is, by name, once, and the error says it is a
// loop (syscall.ELOOP), as the kernel would.
func TestSandbox_EtcLinkDirLoopRefused(t *testing.T) {
	requireSandbox(t)
	// Made by another user, the loop's directory is refused as that
	// user's before the walk comes to the loop.
	requireRootForOwnEtcLinkDir(t)
	dir := t.TempDir()
	mustDo(t, os.Symlink("b", filepath.Join(dir, "a")))
	mustDo(t, os.Symlink("a", filepath.Join(dir, "b")))
	loop := filepath.Join(dir, "a", "etc")
	saved := sandbox.EtcLinkDirs
	sandbox.EtcLinkDirs = []string{"/etc", loop}
	t.Cleanup(func() { sandbox.EtcLinkDirs = saved })
	w, err := New(t.TempDir(), &Options{Sandbox: SandboxAuto})
	if err == nil {
		w.Close()
		t.Fatalf("New with %s, a loop, in EtcLinkDirs succeeded", loop)
	}
	if !errors.Is(err, sandbox.ErrConfig) || !errors.Is(err, syscall.ELOOP) || strings.Count(err.Error(), loop) != 1 {
		t.Errorf("New: %v; want ErrConfig and ELOOP, naming %s once", err, loop)
	}
}

// requireRootForOwnEtcLinkDir skips t unless it runs as root: an
// EtcLinkDirs entry the test makes, and its temporary directory on the
// way to it, are its user's, which the sandbox trusts only when that
// user is root (commands write as the host's user).
func requireRootForOwnEtcLinkDir(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("an EtcLinkDirs entry of the test's own is trusted only when root owns it: run as root")
	}
}

// ownDirRefusal is what the refusal of an EtcLinkDirs entry beneath a
// temporary directory of the test says first when the test runs as a
// user other than root: that directory is the user's, whom the sandbox
// does not trust. "" when the test runs as root.
func ownDirRefusal() string {
	if os.Geteuid() == 0 {
		return ""
	}
	return fmt.Sprintf("owned by uid %d", os.Geteuid())
}
