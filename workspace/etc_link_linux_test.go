//go:build linux

// With Landlock reads are confined to the system's directories, yet some
// systems keep part of /etc elsewhere through links (openSUSE's TLS
// trust store: /etc/ssl/certs leads to /var/lib/ca-certificates/pem).
// Where the links directly in /etc lead stays readable, a file or a
// directory, unless it is hidden.
//
// The tests follow the links of a directory of their own instead of
// /etc's (sandbox.EtcLinkDirs), and place their targets in a directory of
// their own: they write nothing outside their temporary directories.
package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/workspace/sandbox"
)

// fakeEtc makes the sandboxes set up from now on, until t's cleanup,
// follow the links of a directory of t's own (etc) instead of those of
// /etc and its trust stores, and returns it, with base, the directory
// that holds it, for the links' targets: outside /tmp (the sandbox has a
// /tmp of its own) and outside the directories commands may read. It
// skips t unless t runs as root, the one user whose directories the
// sandbox follows links of.
func fakeEtc(t *testing.T) (etc, base string) {
	t.Helper()
	requireRootForOwnEtcLinkDir(t)
	base = dirOutsideTmp(t)
	etc = filepath.Join(base, "etc")
	mustDo(t, os.Mkdir(etc, 0o755))
	saved := sandbox.EtcLinkDirs
	sandbox.EtcLinkDirs = []string{etc}
	t.Cleanup(func() { sandbox.EtcLinkDirs = saved })
	return etc, base
}

func TestSandbox_EtcLinkIntoVarReadable(t *testing.T) {
	requireFullSandbox(t)
	etc, base := fakeEtc(t)
	dir := filepath.Join(base, "ca-certificates")
	mustDo(t, os.Mkdir(dir, 0o755))
	mustDo(t, os.WriteFile(filepath.Join(dir, "ca-bundle.pem"), []byte("-----BEGIN CERTIFICATE-----\n"), 0o644))
	link := filepath.Join(etc, "ca-bundle.pem")
	mustDo(t, os.Symlink(filepath.Join(dir, "ca-bundle.pem"), link))
	dirLink := filepath.Join(etc, "certs")
	mustDo(t, os.Symlink(dir, dirLink))
	// Beside them, where no link leads: Landlock keeps it unreadable.
	other := filepath.Join(base, "other")
	mustDo(t, os.Mkdir(other, 0o755))
	mustDo(t, os.WriteFile(filepath.Join(other, "key.pem"), []byte("-----BEGIN PRIVATE KEY-----\n"), 0o644))
	ws, err := New(t.TempDir(), &Options{AllowNetwork: true})
	mustDo(t, err)
	defer ws.Close()
	for _, path := range []string{link, dirLink + "/ca-bundle.pem"} {
		res := runIn(t, ws, "cat "+path)
		if !strings.Contains(res.Stdout, "BEGIN CERTIFICATE") {
			t.Errorf("the system's configuration, a link directly in /etc leading elsewhere (as openSUSE's trust store), is unreadable: %s: %+v", path, res)
		}
	}
	if res := runIn(t, ws, "cat "+filepath.Join(other, "key.pem")); strings.Contains(res.Stdout, "PRIVATE KEY") {
		t.Errorf("a file where no link of /etc leads, outside the directories commands may read, is readable: %+v", res)
	}
	hiding, err := New(t.TempDir(), &Options{AllowNetwork: true, HidePaths: []string{dir}})
	mustDo(t, err)
	defer hiding.Close()
	for _, path := range []string{link, dirLink + "/ca-bundle.pem"} {
		if res := runIn(t, hiding, "cat "+path); strings.Contains(res.Stdout, "BEGIN CERTIFICATE") {
			t.Errorf("a link in /etc made a hidden file readable: %s: %+v", path, res)
		}
	}
}

// A shell reached through a link directly in /etc (a directory of it,
// or the program itself) is one the sandbox lets commands run, as
// Landlock allows reading and running where such links lead: New takes
// it, and commands run with it.
func TestSandbox_ShellThroughEtcLinkRuns(t *testing.T) {
	requireFullSandbox(t)
	etc, base := fakeEtc(t)
	dir := filepath.Join(base, "shell")
	mustDo(t, os.Mkdir(dir, 0o755))
	sh, err := os.ReadFile("/bin/sh")
	mustDo(t, err)
	mustDo(t, os.WriteFile(filepath.Join(dir, "sh"), sh, 0o755))
	dirLink := filepath.Join(etc, "shell.d")
	mustDo(t, os.Symlink(dir, dirLink))
	fileLink := filepath.Join(etc, "shell.sh")
	mustDo(t, os.Symlink(filepath.Join(dir, "sh"), fileLink))
	for _, shell := range []string{dirLink + "/sh", fileLink} {
		ws, err := New(t.TempDir(), &Options{Shell: shell})
		if err != nil {
			t.Errorf("shell %s, where a link directly in /etc leads: %v", shell, err)
			continue
		}
		if res := runIn(t, ws, "echo ran"); res.Stdout != "ran\n" {
			t.Errorf("shell %s: %+v", shell, res)
		}
		ws.Close()
	}
}
