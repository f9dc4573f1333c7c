//go:build unix

package workspace_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/workspace"
)

// A file the session wrote, replaced by a FIFO, is reported as changed:
// undo does not wait for a writer on the FIFO (holding the journal).
func TestJournal_UndoRefusesFIFO(t *testing.T) {
	dir := t.TempDir()
	rt := actorstest.NewRuntime(t, nil)
	_, j := newJournal(t, dir, memstore.New(nil))
	jt := startJournal(t, rt, j)
	jt.write("s1", "c1", "a.txt", "A1")
	fifo := filepath.Join(dir, "a.txt")
	if err := os.Remove(fifo); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := j.Undo(undoCtx(t), "s1", "c1")
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(20 * time.Second): // a guard against a hang, not a timing
		t.Error("Undo blocked on the FIFO")
		// A writer unblocks the open, so that the test can end.
		if f, oerr := os.OpenFile(fifo, os.O_WRONLY, 0); oerr == nil {
			f.Close()
		}
		err = <-done
	}
	if !errors.Is(err, workspace.ErrChangedSince) || !strings.Contains(err.Error(), "FIFO") {
		t.Errorf("Undo = %v, want ErrChangedSince naming the FIFO", err)
	}
	// The journal is free again: a journaled write goes through.
	jt.write("s1", "c2", "b.txt", "B")
}

// A file the session wrote, grown (sparse) far past what one write may
// hold, is reported as changed without being read into memory.
func TestJournal_UndoDoesNotReadHugeFile(t *testing.T) {
	dir := t.TempDir()
	rt := actorstest.NewRuntime(t, nil)
	ws, err := workspace.New(dir, &workspace.Options{Sandbox: workspace.SandboxOff, MaxWriteBytes: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	j, err := workspace.NewJournal(ws, memstore.New(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	jt := startJournal(t, rt, j)
	jt.write("s1", "c1", "a.txt", "A1")
	const size = 256 << 20
	if err := os.Truncate(filepath.Join(dir, "a.txt"), size); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = j.Undo(undoCtx(t), "s1", "c1")
	runtime.ReadMemStats(&after)
	if !errors.Is(err, workspace.ErrChangedSince) || !strings.Contains(err.Error(), "more than 1024 bytes") {
		t.Errorf("Undo = %v, want ErrChangedSince saying the file is too big", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > size/4 {
		t.Errorf("Undo allocated %d MiB for a %d MiB file", got>>20, size>>20)
	}
}
