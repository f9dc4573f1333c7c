//go:build linux

package workspace

import (
	"context"
	"os"
	"path/filepath"
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

			fx.ws.removeLeftTemps(tmp)
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
