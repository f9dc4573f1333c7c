//go:build linux

// With Landlock reads are confined to the system's directories, yet some
// systems keep part of /etc elsewhere through links (openSUSE's TLS
// trust store: /etc/ssl/certs leads to /var/lib/ca-certificates/pem).
// Where the links directly in /etc lead stays readable, a file or a
// directory, unless it is hidden.
package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSandbox_EtcLinkIntoVarReadable(t *testing.T) {
	requireFullSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to place a link in /etc")
	}
	dir, err := os.MkdirTemp("/var/lib", "pw-test-ca-")
	mustDo(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	mustDo(t, os.WriteFile(filepath.Join(dir, "ca-bundle.pem"), []byte("-----BEGIN CERTIFICATE-----\n"), 0o644))
	link := filepath.Join("/etc", filepath.Base(dir)+".pem")
	mustDo(t, os.Symlink(filepath.Join(dir, "ca-bundle.pem"), link))
	t.Cleanup(func() { os.Remove(link) })
	dirLink := filepath.Join("/etc", filepath.Base(dir)+".d")
	mustDo(t, os.Symlink(dir, dirLink))
	t.Cleanup(func() { os.Remove(dirLink) })
	ws, err := New(t.TempDir(), &Options{AllowNetwork: true})
	mustDo(t, err)
	defer ws.Close()
	for _, path := range []string{link, dirLink + "/ca-bundle.pem"} {
		res := runIn(t, ws, "cat "+path)
		if !strings.Contains(res.Stdout, "BEGIN CERTIFICATE") {
			t.Errorf("the system's configuration in /etc, a link into /var/lib (as openSUSE's trust store), is unreadable: %s: %+v", path, res)
		}
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
	if os.Geteuid() != 0 {
		t.Skip("needs root to place a link in /etc")
	}
	dir, err := os.MkdirTemp("/var/lib", "pw-test-shell-")
	mustDo(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	sh, err := os.ReadFile("/bin/sh")
	mustDo(t, err)
	mustDo(t, os.WriteFile(filepath.Join(dir, "sh"), sh, 0o755))
	dirLink := filepath.Join("/etc", filepath.Base(dir)+".d")
	mustDo(t, os.Symlink(dir, dirLink))
	t.Cleanup(func() { os.Remove(dirLink) })
	fileLink := filepath.Join("/etc", filepath.Base(dir)+".sh")
	mustDo(t, os.Symlink(filepath.Join(dir, "sh"), fileLink))
	t.Cleanup(func() { os.Remove(fileLink) })
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
