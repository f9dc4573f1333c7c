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

// Two workspaces open on one directory (two sessions) writing paths
// hidden from commands in one folder at once share its temporary name
// (hiddenTempName): the second waits for the first, rather than remove
// the first one's temporary file and have its own content renamed over
// the first one's path, half written or not.
func TestHiddenWriteTemp_TwoWorkspacesOnOneDirectory(t *testing.T) {
	fx, in := hidingFixture(t, "cfg/a.env", "cfg/b.env")
	mustDo(t, os.Mkdir(in("cfg"), 0o755))
	other, err := New(fx.ws.dir, &Options{Sandbox: SandboxOff})
	mustDo(t, err)
	defer other.Close()
	other.sandbox = fx.ws.sandbox

	ctx := context.Background()
	type result struct {
		res WriteFileResult
		err error
	}
	otherDone := make(chan result, 1)
	otherAtRename := make(chan struct{})
	otherMayRename := make(chan struct{})
	otherWaits := make(chan struct{})
	other.hookBeforeRename = func() error {
		close(otherAtRename)
		<-otherMayRename
		return nil
	}
	other.hookHiddenTempWait = func() { close(otherWaits) }
	fx.ws.hookBeforeRename = func() error {
		fx.ws.hookBeforeRename = nil
		go func() {
			res, err := other.WriteFile(ctx, WriteFileInput{Path: "cfg/b.env", Content: "B-SECRET"})
			otherDone <- result{res, err}
		}()
		select {
		case <-otherAtRename: // it took the temporary name meanwhile
		case <-otherWaits:
		}
		return nil
	}
	res, err := fx.ws.WriteFile(ctx, WriteFileInput{Path: "cfg/a.env", Content: "A-SECRET"})
	close(otherMayRename)
	got := <-otherDone
	if err != nil || !res.Success {
		t.Errorf("the first write: %+v, %v", res, err)
	}
	if got.err != nil || !got.res.Success {
		t.Errorf("the other workspace's write, at once: %+v, %v", got.res, got.err)
	}
	if got := readFile(t, in("cfg/a.env")); got != "A-SECRET" {
		t.Errorf("cfg/a.env holds %q, want the first write's content", got)
	}
	if got := readFile(t, in("cfg/b.env")); got != "B-SECRET" {
		t.Errorf("cfg/b.env holds %q, want the other write's content", got)
	}
	if left := leftTemps(t, in("cfg")); len(left) != 0 {
		t.Errorf("temporary files left in cfg: %v", left)
	}
}

// A write of a path hidden from commands in a folder where another
// process is writing one (it holds the lock on the folder) is refused,
// and leaves that process's temporary file alone; opening a workspace
// leaves it too.
func TestHiddenWriteTemp_AnotherProcessWriting(t *testing.T) {
	for _, how := range []string{"openat2", "root"} {
		t.Run(how, func(t *testing.T) {
			fx, in := hidingFixture(t, "cfg/a.env")
			if how == "root" {
				fx.ws.sys.openat2 = func(int, string, *unix.OpenHow) (int, error) { return -1, unix.ENOSYS }
			}
			mustDo(t, os.Mkdir(in("cfg"), 0o755))
			mustDo(t, os.WriteFile(in("cfg/a.env"), []byte("OLD"), 0o600))
			tmp := in(filepath.Join("cfg", hiddenTempName))
			mustDo(t, os.WriteFile(tmp, []byte("THEIRS"), 0o600))
			d, err := unix.Open(in("cfg"), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			mustDo(t, err)
			defer unix.Close(d)
			mustDo(t, unix.Flock(d, unix.LOCK_EX|unix.LOCK_NB))

			res, err := fx.ws.WriteFile(context.Background(), WriteFileInput{Path: "cfg/a.env", Content: "MINE"})
			if err != nil || res.Success || res.Reason != ReasonHiddenInUse {
				t.Errorf("a write while another process writes in cfg: %+v, %v; want it refused (%s)", res, err, ReasonHiddenInUse)
			}
			if got := readFile(t, tmp); got != "THEIRS" {
				t.Errorf("the other process's temporary file holds %q, want it left alone", got)
			}
			if got := readFile(t, in("cfg/a.env")); got != "OLD" {
				t.Errorf("cfg/a.env holds %q, want it as it was", got)
			}

			fx.ws.lockHiddenTemp()
			fx.ws.removeLeftTemps(tmp)
			hiddenTempMu.Unlock()
			if got := readFile(t, tmp); got != "THEIRS" {
				t.Errorf("the other process's temporary file after the leftovers' removal: %q, want it left alone", got)
			}

			mustDo(t, unix.Flock(d, unix.LOCK_UN))
			res, err = fx.ws.WriteFile(context.Background(), WriteFileInput{Path: "cfg/a.env", Content: "MINE"})
			if err != nil || !res.Success {
				t.Fatalf("the write once the other process is done: %+v, %v", res, err)
			}
			if got := readFile(t, in("cfg/a.env")); got != "MINE" {
				t.Errorf("cfg/a.env holds %q", got)
			}
		})
	}
}

// The temporary name of a hidden path's write is refused by the file
// tools however it is spelled: in another case (on a folder that
// ignores case it names that very file), through "./", or as where a
// symbolic link leads a write (what was written there would be taken
// for a leftover and removed by the next write of a hidden path there,
// and no undo could restore it).
func TestHiddenWriteTemp_ReservedWhateverTheSpelling(t *testing.T) {
	fx, in := hidingFixture(t, "sec/key.txt")
	mustDo(t, os.Mkdir(in("sec"), 0o755))
	tmp := in(filepath.Join("sec", hiddenTempName))
	mustDo(t, os.WriteFile(tmp, []byte("LEFT"), 0o600))
	mustDo(t, os.Symlink(filepath.Join("sec", hiddenTempName), in("x.txt")))
	mustDo(t, os.Mkdir(in("pub"), 0o755))
	mustDo(t, os.Mkdir(in("pub/"+hiddenTempName), 0o755))
	mustDo(t, os.Symlink(hiddenTempName, in("pub/d")))
	ctx := context.Background()
	upper := "sec/" + strings.ToUpper(hiddenTempName)
	for _, p := range []string{upper, "sec/./" + hiddenTempName, "./sec/" + hiddenTempName} {
		if res, err := fx.ws.ReadFile(ctx, ReadFileInput{Path: p}); err != nil || res.Reason != ReasonReserved {
			t.Errorf("read_file %s: %+v, %v; want it refused (%s)", p, res, err, ReasonReserved)
		}
	}
	for _, p := range []string{upper, "sec/./" + hiddenTempName, "x.txt", "pub/d/a.txt"} {
		if res, err := fx.ws.WriteFile(ctx, WriteFileInput{Path: p, Content: "MODEL"}); err != nil || res.Reason != ReasonReserved {
			t.Errorf("write_file %s: %+v, %v; want it refused (%s)", p, res, err, ReasonReserved)
		}
	}
	if got := readFile(t, tmp); got != "LEFT" {
		t.Errorf("the temporary file holds %q after the refused writes", got)
	}
	if _, err := os.Stat(in("sec/" + strings.ToUpper(hiddenTempName))); err == nil && !sameFile(t, in(upper), tmp) {
		t.Errorf("write_file made %s", upper)
	}
	if _, err := os.Stat(in("pub/" + hiddenTempName + "/a.txt")); err == nil {
		t.Errorf("write_file wrote pub/%s/a.txt", hiddenTempName)
	}
}

func sameFile(t *testing.T, a, b string) bool {
	t.Helper()
	fa, err := os.Stat(a)
	mustDo(t, err)
	fb, err := os.Stat(b)
	mustDo(t, err)
	return os.SameFile(fa, fb)
}

// What holds the temporary name of a hidden path's write as the
// workspace is opened and is not the tools' (a FIFO, a folder: a
// command's, made where the name was not there to hide) is hidden
// while it is there, and its going is no move of a hidden path: the
// write that removes a FIFO there keeps the commands running. A folder
// of that name is not removed: the write is refused, saying so.
func TestHiddenWriteTemp_NotTheToolsAtOpen(t *testing.T) {
	requireSandbox(t)
	dir := t.TempDir()
	mustDo(t, os.Mkdir(filepath.Join(dir, "sec"), 0o755))
	mustDo(t, os.Mkdir(filepath.Join(dir, "cfg"), 0o755))
	mustDo(t, os.WriteFile(filepath.Join(dir, "sec/key.txt"), []byte("OLD"), 0o600))
	mustDo(t, unix.Mkfifo(filepath.Join(dir, "sec", hiddenTempName), 0o600))
	mustDo(t, os.Mkdir(filepath.Join(dir, "cfg", hiddenTempName), 0o755))
	ws, err := New(dir, &Options{Sandbox: SandboxRequired,
		HidePaths: []string{filepath.Join(dir, "sec/key.txt"), filepath.Join(dir, "cfg/.env")}})
	mustDo(t, err)
	defer ws.Close()
	ctx := context.Background()
	if res, err := ws.WriteFile(ctx, WriteFileInput{Path: "sec/key.txt", Content: "NEW"}); err != nil || !res.Success {
		t.Fatalf("write of sec/key.txt: %+v, %v", res, err)
	}
	run, err := ws.RunCommand(ctx, RunCommandInput{Command: "cat sec/key.txt; echo ran"})
	mustDo(t, err)
	if !strings.Contains(run.Stdout, "ran") || strings.Contains(run.Stdout, "NEW") {
		t.Errorf("a command after the write that removed the FIFO at the temporary name: %+v; want it run, the file hidden", run)
	}
	res, err := ws.WriteFile(ctx, WriteFileInput{Path: "cfg/.env", Content: "NEW"})
	if err != nil || res.Success || !strings.Contains(res.Error, hiddenTempName) {
		t.Errorf("write of cfg/.env, a folder at the temporary name: %+v, %v; want it refused, naming it", res, err)
	}
}
