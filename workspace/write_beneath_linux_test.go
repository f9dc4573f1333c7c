//go:build linux

package workspace

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/workspace/sandbox"
	"golang.org/x/sys/unix"
)

// An undo's restore of a path to hide reaches the directory of what it
// restores as a write does: a command that swaps a directory on the way
// for a link to a directory it sees, after the name was checked, gets
// the restore refused, and the previous content lands nowhere it sees.
func TestRestore_ParentSwappedAfterTheCheck(t *testing.T) {
	fx, in := hidingFixture(t, "cfg/.env")
	mustDo(t, os.Mkdir(in("pub"), 0o755))
	mustDo(t, os.Mkdir(in("cfg"), 0o755))
	mustDo(t, os.WriteFile(in("cfg/.env"), []byte("new\n"), 0o600))
	fx.ws.hookAfterCheck = func() {
		mustDo(t, os.RemoveAll(in("cfg")))
		mustDo(t, os.Symlink("pub", in("cfg")))
	}
	err := fx.ws.restore(&writeRecord{Path: "cfg/.env", Existed: true, Perm: 0o600, Prev: []byte("SECRET\n")})
	fx.ws.hookAfterCheck = nil
	if err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("restore of cfg/.env, cfg swapped for a link to pub after the check: %v; want refused for the link", err)
	}
	if err != nil && strings.Contains(err.Error(), fx.ws.dir) {
		t.Errorf("restore's error %q names a host path", err)
	}
	assertNoFiles(t, in("pub"), "restore of cfg/.env, cfg swapped for a link to pub")
}

// A folder a write creates on the way to a path to hide is created
// following no link: a command that makes a directory on the way a
// link to a directory it sees, after the write found the folder
// missing and before it creates it, gets the write refused, with no
// folder created where the link leads. A name that is not a path to
// hide is written through the link, as before.
func TestWriteFile_LinkPlantedBeforeTheFolderIsCreated(t *testing.T) {
	fx, in := hidingFixture(t, "cfg/sub/.env")
	t.Cleanup(func() { fx.ws.sys.openat2 = nil })
	for _, c := range []struct {
		name   string
		hidden bool
	}{{"cfg/sub/.env", true}, {"cfg/sub/seen.txt", false}} {
		mustDo(t, os.Mkdir(in("pub"), 0o755))
		mustDo(t, os.Mkdir(in("cfg"), 0o755))
		// The first open that finds cfg/sub missing swaps cfg for a
		// link to pub before the write goes on.
		swapped := false
		fx.ws.sys.openat2 = func(dirfd int, path string, how *unix.OpenHow) (int, error) {
			fd, err := unix.Openat2(dirfd, path, how)
			if err == unix.ENOENT && path == "cfg/sub" && !swapped {
				swapped = true
				mustDo(t, os.Remove(in("cfg")))
				mustDo(t, os.Symlink("pub", in("cfg")))
			}
			return fd, err
		}
		res, err := fx.ws.WriteFile(context.Background(), WriteFileInput{Path: c.name, Content: "secret\n"})
		mustDo(t, err)
		fx.ws.sys.openat2 = nil
		if !swapped {
			t.Fatalf("write_file %s: the write never found cfg/sub missing", c.name)
		}
		if c.hidden {
			if res.Success || res.Reason != ReasonLinkToHidden {
				t.Errorf("write_file %s, cfg made a link to pub before cfg/sub was created: %+v; want refused (%s)",
					c.name, res, ReasonLinkToHidden)
			}
			if strings.Contains(res.Error, fx.ws.dir) {
				t.Errorf("write_file %s: message %q names a host path", c.name, res.Error)
			}
			ents, err := os.ReadDir(in("pub"))
			mustDo(t, err)
			if len(ents) != 0 {
				t.Errorf("write_file %s, cfg made a link to pub: %d entries created in pub (%s...), which commands see",
					c.name, len(ents), ents[0].Name())
			}
		} else if !res.Success || readFile(t, in("pub/sub/seen.txt")) != "secret\n" {
			t.Errorf("write_file %s, cfg made a link to pub before cfg/sub was created: %+v; want pub/sub/seen.txt written",
				c.name, res)
		}
		mustDo(t, os.RemoveAll(in("pub")))
		mustDo(t, os.Remove(in("cfg")))
	}
}

// hidingFixture is newFixture without a sandbox, its workspace told to
// hide the names hidden (relative to it, patterns allowed) as a sandbox
// would, and a function giving a name's host path in it.
func hidingFixture(t *testing.T, hidden ...string) (*fixture, func(name string) string) {
	t.Helper()
	fx := newFixture(t, &Options{Sandbox: SandboxOff})
	in := func(name string) string { return filepath.Join(fx.ws.dir, name) }
	cfg := &sandbox.Config{}
	for _, h := range hidden {
		cfg.Resolved = append(cfg.Resolved, sandbox.HiddenPath{Path: in(h)})
	}
	fx.ws.sandbox = cfg
	t.Cleanup(func() { fx.ws.sandbox = nil })
	return fx, in
}

// assertNoFiles fails t when a file (anything but a directory) is
// beneath dir.
func assertNoFiles(t *testing.T, dir, what string) {
	t.Helper()
	mustDo(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("%s: %s was written, which commands see", what, p)
		}
		return err
	}))
}

// Where openat2 is not available (a kernel before 5.6, a seccomp
// filter refusing it), a write of a path to hide goes through the root,
// which follows links within the workspace: a command that swapped a
// directory on the way for a link to a directory it sees, after the
// name was checked and before the write held commands off, gets the
// write (and undo's restore and removal) refused all the same, and
// nothing lands, or is removed, where the link leads.
func TestHiddenWrite_ParentSwappedAfterTheCheckWithoutOpenat2(t *testing.T) {
	fx, in := hidingFixture(t, "cfg/.env")
	fx.ws.sys.openat2 = func(int, string, *unix.OpenHow) (int, error) { return -1, unix.ENOSYS }
	t.Cleanup(func() { fx.ws.sys.openat2 = nil })
	for _, how := range []string{"write_file", "undo's restore", "undo's removal"} {
		mustDo(t, os.Mkdir(in("pub"), 0o755))
		mustDo(t, os.Mkdir(in("cfg"), 0o755))
		mustDo(t, os.WriteFile(in("pub/.env"), []byte("seen\n"), 0o644))
		fx.ws.hookAfterCheck = func() {
			mustDo(t, os.RemoveAll(in("cfg")))
			mustDo(t, os.Symlink("pub", in("cfg")))
		}
		var why string
		switch how {
		case "write_file":
			res, err := fx.ws.WriteFile(context.Background(), WriteFileInput{Path: "cfg/.env", Content: "SECRET\n"})
			mustDo(t, err)
			if res.Success || res.Reason != ReasonLinkToHidden {
				t.Errorf("%s of cfg/.env, cfg swapped for a link to pub after the check: %+v; want refused (%s)", how, res, ReasonLinkToHidden)
			}
			why = res.Error
		default:
			err := fx.ws.restore(&writeRecord{Path: "cfg/.env", Existed: how == "undo's restore", Perm: 0o600, Prev: []byte("SECRET\n")})
			if err == nil {
				t.Errorf("%s of cfg/.env, cfg swapped for a link to pub after the check: done; want refused", how)
			} else {
				why = err.Error()
			}
		}
		fx.ws.hookAfterCheck = nil
		if strings.Contains(why, fx.ws.dir) {
			t.Errorf("%s: %q names a host path", how, why)
		}
		if got := readFile(t, in("pub/.env")); got != "seen\n" {
			t.Errorf("%s of cfg/.env, cfg swapped for a link to pub after the check: pub/.env is %q, want it untouched", how, got)
		}
		ents, err := os.ReadDir(in("pub"))
		mustDo(t, err)
		if len(ents) != 1 {
			t.Errorf("%s: pub holds %d entries, want only .env", how, len(ents))
		}
		mustDo(t, os.RemoveAll(in("pub")))
		mustDo(t, os.Remove(in("cfg")))
	}
}

// A write through a symbolic link to a directory on the way (pub ->
// sec, a command's) lands where the link leads, and is judged by that
// place: a path hidden from commands there (sec/key.txt) is written as
// one, refused while a command runs (ReasonHiddenInUse), and what the
// write replaced is recorded under that place, so that an undo puts
// the hidden file's content back there, not at the name the link made
// (a command may later make pub a directory of its own, where it would
// see what is restored).
func TestWriteFile_ThroughALinkedFolderIntoAHiddenPath(t *testing.T) {
	fx, in := hidingFixture(t, "sec/key.txt")
	mustDo(t, os.Mkdir(in("sec"), 0o755))
	mustDo(t, os.WriteFile(in("sec/key.txt"), []byte("SECRET"), 0o600))
	mustDo(t, os.Symlink("sec", in("pub")))
	ctx := context.Background()

	mustDo(t, fx.ws.commandBegins(ctx)) // as while a command runs
	res, err := fx.ws.WriteFile(ctx, WriteFileInput{Path: "pub/key.txt", Content: "known"})
	fx.ws.commandEnds()
	mustDo(t, err)
	if res.Success || res.Reason != ReasonHiddenInUse {
		t.Errorf("write_file pub/key.txt (pub -> sec, sec/key.txt hidden) while a command runs: %+v; want refused (%s)", res, ReasonHiddenInUse)
	}
	if got := readFile(t, in("sec/key.txt")); got != "SECRET" {
		t.Fatalf("sec/key.txt after the refused write: %q", got)
	}

	var rec *writeRecord
	res, err = fx.ws.writeFile(ctx, WriteFileInput{Path: "pub/key.txt", Content: "known"}, func(target string, perm fs.FileMode, exists bool) error {
		rec = fx.ws.replaced(target, perm, exists)
		return nil
	})
	mustDo(t, err)
	if !res.Success || readFile(t, in("sec/key.txt")) != "known" {
		t.Fatalf("write_file pub/key.txt with no command running: %+v", res)
	}
	// The command makes pub a directory of its own, with the content it
	// knows was written, and the write is undone.
	mustDo(t, os.Remove(in("pub")))
	mustDo(t, os.Mkdir(in("pub"), 0o755))
	mustDo(t, os.WriteFile(in("pub/key.txt"), []byte("known"), 0o644))
	if rec.Path != "sec/key.txt" {
		t.Errorf("the write of pub/key.txt through pub -> sec is recorded as %q, want sec/key.txt", rec.Path)
	}
	_ = fx.ws.restore(rec)
	if got := readFile(t, in("pub/key.txt")); strings.Contains(got, "SECRET") {
		t.Errorf("undo put the hidden file's content at pub/key.txt, which commands see")
	}
	if got := readFile(t, in("sec/key.txt")); got != "SECRET" {
		t.Errorf("sec/key.txt after the undo: %q, want what the write replaced", got)
	}
}
