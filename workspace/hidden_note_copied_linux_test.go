//go:build linux

package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The note a file the tools wrote at a path hidden from commands carries
// (replacedAttr) is of that file alone. A copy of it that keeps its
// extended attributes (cp -a, an editor that saves by renaming the file
// to a backup and writing a new one) is another file: put in its place,
// while the file written went to a name commands see, it is a
// replacement from outside the tools, and every workspace refuses its
// commands, the one that still expected what the tools replaced too.
func TestHiddenPathCopyWithTheToolsNoteRefused(t *testing.T) {
	requireSandbox(t)
	dir := dirWithHiddenEnv(t)
	in := func(name string) string { return filepath.Join(dir, name) }
	requireUserXattrs(t, dir)
	opts := hiddenEnvOptions(dir)
	a, err := New(dir, opts)
	mustDo(t, err)
	defer a.Close()
	b, err := New(dir, opts)
	mustDo(t, err)
	defer b.Close()
	res, err := b.WriteFile(context.Background(), WriteFileInput{Path: "cfg/.env", Content: "NEWSECRET"})
	mustDo(t, err)
	if !res.Success {
		t.Fatalf("write_file cfg/.env: %+v", res)
	}
	// From outside the tools, as an editor saves: the file written goes
	// to a backup commands see, and a copy with its attributes takes its
	// place.
	note := make([]byte, 4096)
	n, err := unix.Getxattr(in("cfg/.env"), replacedAttr, note)
	mustDo(t, err)
	mustDo(t, os.WriteFile(in("cfg/.env.new"), []byte("EDITED"), 0o600))
	mustDo(t, unix.Setxattr(in("cfg/.env.new"), replacedAttr, note[:n], 0))
	mustDo(t, os.Rename(in("cfg/.env"), in("seen.txt")))
	mustDo(t, os.Rename(in("cfg/.env.new"), in("cfg/.env")))
	for name, ws := range map[string]*Workspace{"a (no command since the write)": a, "b (the writer)": b} {
		res, err := ws.RunCommand(context.Background(), RunCommandInput{Command: "cat seen.txt"})
		mustDo(t, err)
		if res.Success || res.Sandboxed || strings.Contains(res.Stdout, "NEWSECRET") || !strings.Contains(res.Error, "moved or replaced") {
			t.Errorf("a command of workspace %s once the file written was moved and a copy of it put in its place: %+v; "+
				"want it refused", name, res)
		}
	}
}
