//go:build unix

package workspace

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// nobody is the user the permission tests act as when run as root, who
// passes every permission check.
const nobody = 65534

// asUnprivileged runs f as a user that permission checks apply to: the
// test's own user, or, when that is root, nobody (the effective user of
// the whole process is switched for f's duration, so this test must not
// run in parallel with others).
func asUnprivileged(t *testing.T, f func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		f()
		return
	}
	if err := syscall.Seteuid(nobody); err != nil {
		t.Fatalf("cannot act as an unprivileged user (seteuid %d): %v", nobody, err)
	}
	defer func() {
		if err := syscall.Seteuid(0); err != nil {
			panic("cannot switch back to root: " + err.Error())
		}
	}()
	f()
}

// write_file does not replace a file the process may not write, though
// the directory is writable and a rename would succeed; a writable file
// is still replaced.
func TestWriteFile_RefusesFileNotWritable(t *testing.T) {
	dir := t.TempDir()
	ws, err := New(dir, &Options{Sandbox: SandboxOff})
	mustDo(t, err)
	defer ws.Close()
	mustDo(t, os.Chmod(dir, 0o777)) // writable by the unprivileged user too
	ro := filepath.Join(dir, "ro.txt")
	mustDo(t, os.WriteFile(ro, []byte("keep"), 0o444))
	mustDo(t, os.Chmod(ro, 0o444))
	rw := filepath.Join(dir, "rw.txt")
	mustDo(t, os.WriteFile(rw, []byte("old"), 0o666))
	mustDo(t, os.Chmod(rw, 0o666))
	ctx := context.Background()
	var refused, written WriteFileResult
	asUnprivileged(t, func() {
		refused, err = ws.WriteFile(ctx, WriteFileInput{Path: "ro.txt", Content: "new"})
		mustDo(t, err)
		written, err = ws.WriteFile(ctx, WriteFileInput{Path: "rw.txt", Content: "new"})
		mustDo(t, err)
	})
	if refused.Success || refused.Reason != ReasonPermission {
		t.Errorf("write of a read-only file = %+v, want refused with ReasonPermission", refused)
	}
	if b, _ := os.ReadFile(ro); string(b) != "keep" {
		t.Errorf("the read-only file now holds %q", b)
	}
	if !written.Success {
		t.Errorf("write of a writable file = %+v", written)
	}
	if b, _ := os.ReadFile(rw); string(b) != "new" {
		t.Errorf("the writable file holds %q, want the new content", b)
	}
}
