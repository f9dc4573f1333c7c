//go:build linux

package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/workspace/sandbox"
)

// A directory of sandbox.EtcLinkDirs that someone besides root and the
// host's own user could plant a link in (where the link leads becomes
// readable to commands), or that commands could (it is in the
// workspace), is refused as the sandbox is set up, by name, rather than
// followed.
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
