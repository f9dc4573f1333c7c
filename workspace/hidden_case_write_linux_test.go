//go:build linux

package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// On a case-insensitive directory (vfat, exfat, ntfs3, ext4 with
// casefold) SEC/key.txt names what sec/key.txt, a path to hide, names:
// write_file under that spelling replaces the hidden file, and the
// file it puts there is the tools' own, which the next command's
// sandbox expects there, as after a write under the path's own
// spelling; a workspace of the process that did not write it expects
// it too. The test's directory is case-sensitive; sec bound at SEC, in
// a mount namespace of the test's own, gives it two names, differing
// in case, for one directory, as a case-insensitive one has.
func TestHiddenPathWrittenUnderAnotherCaseKeepsCommandsRunning(t *testing.T) {
	requireSandbox(t)
	if child, out, err := inChild(t, syscall.CLONE_NEWUSER|syscall.CLONE_NEWNS); !child {
		if err != nil {
			t.Fatalf("child failed: %v\n%s", err, out)
		}
		return
	}
	dir := t.TempDir()
	in := func(name string) string { return filepath.Join(dir, name) }
	mustDo(t, os.Mkdir(in("sec"), 0o755))
	mustDo(t, os.Mkdir(in("SEC"), 0o755))
	mustDo(t, os.WriteFile(in("sec/key.txt"), []byte("OLDSECRET"), 0o600))
	mustDo(t, unix.Mount(in("sec"), in("SEC"), "", unix.MS_BIND, ""))
	t.Cleanup(func() { mustDo(t, unix.Unmount(in("SEC"), unix.MNT_DETACH)) })

	opts := &Options{Sandbox: SandboxRequired, HidePaths: []string{in("sec/key.txt")}}
	ws, err := New(dir, opts)
	mustDo(t, err)
	defer ws.Close()
	other, err := New(dir, opts)
	mustDo(t, err)
	defer other.Close()
	for _, content := range []string{"NEWSECRET", "NEWERSECRET"} {
		res, err := ws.WriteFile(context.Background(), WriteFileInput{Path: "SEC/key.txt", Content: content})
		mustDo(t, err)
		if !res.Success || readFile(t, in("sec/key.txt")) != content {
			t.Fatalf("write_file SEC/key.txt, the very file sec/key.txt names: %+v; want sec/key.txt written", res)
		}
		for name, w := range map[string]*Workspace{"that wrote it": ws, "that did not": other} {
			res, err := w.RunCommand(context.Background(), RunCommandInput{Command: "echo ran"})
			mustDo(t, err)
			if !res.Sandboxed || res.Stdout != "ran\n" {
				t.Errorf("a command of the workspace %s, after a write of the hidden path under another case: %+v; "+
					"want it run", name, res)
			}
		}
	}
	// A file put there from outside the tools is still refused.
	mustDo(t, os.Rename(in("sec/key.txt"), in("seen.txt")))
	mustDo(t, os.WriteFile(in("sec/key.txt"), []byte("PLANTED"), 0o600))
	res, err := ws.RunCommand(context.Background(), RunCommandInput{Command: "cat seen.txt"})
	mustDo(t, err)
	if res.Sandboxed || !strings.Contains(res.Error, "moved or replaced") {
		t.Errorf("a command once sec/key.txt was replaced from outside: %+v; want it refused", res)
	}
}
