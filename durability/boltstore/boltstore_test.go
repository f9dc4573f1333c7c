package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/durabilitytest"
	"github.com/polyweave/polyweave-go/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

func openTemp(t *testing.T, opts *Options) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s, path
}

// The package's long tests (the conformance suites here, the campaigns
// and TestCheckpoint_CrashAtEveryCommit) run in parallel, each on stores
// of its own: the suites mostly wait on fsync, the others compute, and
// side by side they keep the cores busy.
func TestConformance(t *testing.T) {
	t.Parallel()
	durabilitytest.Run(t, func(t *testing.T) durability.Store {
		s, _ := openTemp(t, nil)
		return s
	})
}

// TestNameLimit: names up to MaxNameLen bytes (bbolt's longest key).
func TestNameLimit(t *testing.T) {
	t.Parallel()
	durabilitytest.RunNameLimit(t, func(t *testing.T) durability.Store {
		s, _ := openTemp(t, nil)
		return s
	}, MaxNameLen)
}

// TestConformance_SmallBatchesAndCheckpoints runs the suite with a
// gathering delay, tiny batches and a checkpoint every third write, so that
// reads see data split between the log and the buckets.
func TestConformance_SmallBatchesAndCheckpoints(t *testing.T) {
	t.Parallel()
	durabilitytest.Run(t, func(t *testing.T) durability.Store {
		s, _ := openTemp(t, &Options{MaxBatchSize: 3, MaxBatchDelay: 200 * time.Microsecond, CheckpointOps: 3})
		return s
	})
}

// TestConformance_CheckpointEveryCommit runs the suite with the log moved
// into the buckets after every commit.
func TestConformance_CheckpointEveryCommit(t *testing.T) {
	t.Parallel()
	durabilitytest.Run(t, func(t *testing.T) durability.Store {
		s, _ := openTemp(t, &Options{CheckpointOps: 1})
		return s
	})
}

// crash stops s the way a killed process would: the committer is stopped
// and the file closed without the final checkpoint, so the log is left
// for the next Open to replay.
func crash(t testing.TB, s *Store) {
	t.Helper()
	s.mu.Lock()
	s.closed = true
	close(s.writes)
	s.mu.Unlock()
	<-s.committerDone
	if err := s.db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestReplay_AfterCrash writes a mix of events, snapshots and deletes, part
// of it checkpointed and part only in the log, "crashes", and checks that
// the reopened store holds exactly what was acknowledged.
func TestReplay_AfterCrash(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "crash.db")
	s, err := Open(path, &Options{CheckpointOps: 5})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range uint64(12) { // checkpoints after writes 5 and 10
		must(s.PersistEvent(ctx, "a", i, fmt.Appendf(nil, "a%d", i)))
	}
	must(s.PersistSnapshot(ctx, "a", 8, []byte("before 8"))) // compacts 0..7, in the log only
	must(s.PersistEvent(ctx, "a", 9, []byte("a9 again")))
	must(s.PersistEvent(ctx, "b", 0, []byte("b0")))
	must(s.DeleteEvents(ctx, "b", 0))
	must(s.PersistEvent(ctx, "b", 1, []byte("b1")))
	if s.overlay.ops == 0 {
		t.Fatal("nothing left in the log; the test would not test replay")
	}
	crash(t, s)

	s, err = Open(path, nil)
	if err != nil {
		t.Fatalf("reopen after crash: %v", err)
	}
	defer s.Close()
	if s.overlay.ops != 0 {
		t.Errorf("Open left %d writes in the log", s.overlay.ops)
	}
	read := func(name string) string {
		var got []string
		must(s.GetEvents(ctx, name, 0, 0, func(i uint64, d []byte) error {
			got = append(got, fmt.Sprintf("%d:%s", i, d))
			return nil
		}))
		return fmt.Sprint(got)
	}
	if got, want := read("a"), "[8:a8 9:a9 again 10:a10 11:a11]"; got != want {
		t.Errorf("a after replay = %s, want %s", got, want)
	}
	if got, want := read("b"), "[1:b1]"; got != want {
		t.Errorf("b after replay = %s, want %s", got, want)
	}
	snap, ok, err := s.GetSnapshot(ctx, "a")
	if err != nil || !ok || snap.Index != 8 || string(snap.Data) != "before 8" {
		t.Errorf("snapshot after replay = %+v, %v, %v", snap, ok, err)
	}
}

// TestReplay_ReadOnlySeesLog opens a crashed file read-only: the log is
// read into memory (not written back) and reads see it.
func TestReplay_ReadOnlySeesLog(t *testing.T) {
	ctx := t.Context()
	s, path := openTemp(t, nil)
	if err := s.PersistEvent(ctx, "a", 0, []byte("in the log")); err != nil {
		t.Fatal(err)
	}
	crash(t, s)
	ro, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if got := events(t, ro, 0); got != "[in the log]" {
		t.Errorf("read-only store over a crashed file reads %v", got)
	}
}

func TestReopen_DataSurvives(t *testing.T) {
	ctx := t.Context()
	s, path := openTemp(t, nil)
	for i := range uint64(10) {
		if err := s.PersistEvent(ctx, "a", i, fmt.Appendf(nil, "e%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PersistSnapshot(ctx, "a", 6, []byte("state before 6")); err != nil {
		t.Fatal(err)
	}
	if err := s.PersistEvent(ctx, "b", 0, []byte("b0")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := Open(path, nil)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	snap, ok, err := s.GetSnapshot(ctx, "a")
	if err != nil || !ok || snap.Index != 6 || string(snap.Data) != "state before 6" {
		t.Fatalf("GetSnapshot after reopen = %+v, %v, %v", snap, ok, err)
	}
	var got []string
	err = s.GetEvents(ctx, "a", 0, 0, func(i uint64, d []byte) error {
		got = append(got, fmt.Sprintf("%d:%s", i, d))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "[6:e6 7:e7 8:e8 9:e9]"; fmt.Sprint(got) != want {
		t.Errorf("events after reopen = %v, want %s", got, want)
	}
	// Writing goes on where it left off.
	if err := s.PersistEvent(ctx, "b", 1, []byte("b1")); err != nil {
		t.Errorf("PersistEvent after reopen: %v", err)
	}
}

// TestGetEvents_ManyPages reads more than one page, with the events all in
// the log, all in the buckets, and split between them.
func TestGetEvents_ManyPages(t *testing.T) {
	for _, checkpointOps := range []int{1, 1000, 100_000} {
		t.Run(fmt.Sprint("checkpoint=", checkpointOps), func(t *testing.T) {
			ctx := t.Context()
			s, _ := openTemp(t, &Options{NoSync: true, CheckpointOps: checkpointOps})
			defer s.Close()
			const n = readPageEvents*2 + 17
			var wg sync.WaitGroup
			for i := range uint64(n) {
				wg.Go(func() {
					if err := s.PersistEvent(ctx, "p", i, fmt.Appendf(nil, "%d", i)); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			next := uint64(1)
			err := s.GetEvents(ctx, "p", 1, n-1, func(i uint64, d []byte) error {
				if i != next || string(d) != fmt.Sprint(i) {
					return fmt.Errorf("got event %d %q, want %d", i, d, next)
				}
				next++
				return nil
			})
			if err != nil || next != n-1 {
				t.Errorf("GetEvents over pages: err %v, stopped before %d, want %d", err, next, n-1)
			}
		})
	}
}

func TestKeepHistory(t *testing.T) {
	ctx := t.Context()
	s, _ := openTemp(t, &Options{KeepHistory: true})
	defer s.Close()
	for i := range uint64(4) {
		if err := s.PersistEvent(ctx, "a", i, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range []uint64{1, 3} {
		if err := s.PersistSnapshot(ctx, "a", i, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteSnapshots(ctx, "a", 2); err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := s.GetEvents(ctx, "a", 0, 0, func(uint64, []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 4 {
		t.Errorf("%d events after snapshots with KeepHistory, want 4", n)
	}
}

func TestOpen_RejectsBadOptions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	for _, o := range []Options{{MaxBatchSize: -1}, {MaxBatchDelay: -time.Second}, {OpenTimeout: -1}, {CheckpointOps: -1}, {CheckpointBytes: -1}} {
		if s, err := Open(path, &o); err == nil {
			s.Close()
			t.Errorf("Open with %+v succeeded", o)
		}
	}
}

func TestOpen_LockedFileTimesOut(t *testing.T) {
	s, path := openTemp(t, nil)
	defer s.Close()
	_, err := Open(path, &Options{OpenTimeout: 50 * time.Millisecond})
	var se *durability.StoreError
	if !errors.As(err, &se) || se.Op != durability.OpOpen || !errors.Is(err, durability.ErrLocked) {
		t.Fatalf("second Open of a locked file: %v, want a StoreError wrapping ErrLocked", err)
	}
	holder := "held by another open store of this process"
	if runtime.GOOS != "linux" { // only Linux tells who holds a lock (/proc/locks)
		holder = "held by another process (or another open store of this process)"
	}
	if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, holder) {
		t.Errorf("locked-file error %q does not name the path and say %q", msg, holder)
	}
	if runtime.GOOS == "linux" && strings.Contains(err.Error(), "by another process") {
		t.Errorf("locked-file error %q blames another process: the holder is this one", err)
	}
}

// TestOpen_ReadOnlySharesTheLock: read-only stores share the file, and
// a store that writes waits for them and then fails with ErrLocked; once
// they are closed it opens.
func TestOpen_ReadOnlySharesTheLock(t *testing.T) {
	s, path := openTemp(t, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var readers []*Store
	for range 2 {
		ro, err := Open(path, &Options{ReadOnly: true, OpenTimeout: 50 * time.Millisecond})
		if err != nil {
			t.Fatalf("read-only Open next to %d read-only stores: %v", len(readers), err)
		}
		readers = append(readers, ro)
	}
	if w, err := Open(path, &Options{OpenTimeout: 50 * time.Millisecond}); !errors.Is(err, durability.ErrLocked) {
		if err == nil {
			w.Close()
		}
		t.Errorf("Open for writing next to read-only stores: %v, want an error wrapping ErrLocked", err)
	}
	for _, ro := range readers {
		if err := ro.Close(); err != nil {
			t.Fatal(err)
		}
	}
	w, err := Open(path, &Options{OpenTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open for writing once the read-only stores are closed: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestOpen_FileMode(t *testing.T) {
	s, path := openTemp(t, &Options{FileMode: 0o640})
	defer s.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("file mode %v, want 0640", fi.Mode().Perm())
	}
}

// TestReadOnly_WritesFail opens an existing file read-only: reads see the
// data, every write returns a permanent error naming the operation, the
// actor and the file, and nothing changes.
func TestReadOnly_WritesFail(t *testing.T) {
	ctx := t.Context()
	s, path := openTemp(t, nil)
	if err := s.PersistEvent(ctx, "a", 0, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	ro, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("Open read-only: %v", err)
	}
	defer ro.Close()
	writes := map[string]error{
		durability.OpPersistEvent:    ro.PersistEvent(ctx, "a", 1, []byte("lost?")),
		durability.OpPersistSnapshot: ro.PersistSnapshot(ctx, "a", 1, []byte("lost?")),
		durability.OpDeleteEvents:    ro.DeleteEvents(ctx, "a", 5),
		durability.OpDeleteSnapshots: ro.DeleteSnapshots(ctx, "a", 5),
	}
	for op, err := range writes {
		var se *durability.StoreError
		if !errors.As(err, &se) || se.Op != op || se.Name != "a" || !errors.Is(err, bolterrors.ErrDatabaseReadOnly) {
			t.Errorf("%s on read-only store: %v, want a StoreError wrapping ErrDatabaseReadOnly", op, err)
		}
		if durability.IsRetryable(err) {
			t.Errorf("%s on read-only store reported retryable", op)
		}
		if !durability.IsPermanent(err) {
			t.Errorf("%s on read-only store: %v, not permanent: a caller would retry it in vain", op, err)
		}
		if msg := fmt.Sprint(err); !strings.Contains(msg, path) || !strings.Contains(msg, "read-only") {
			t.Errorf("%s on read-only store: %q does not name the file and say it is read-only", op, msg)
		}
	}
	if _, err := ro.Compact(ctx); !errors.Is(err, bolterrors.ErrDatabaseReadOnly) || !durability.IsPermanent(err) {
		t.Errorf("Compact on read-only store: %v, want a permanent error wrapping ErrDatabaseReadOnly", err)
	}
	if got := events(t, ro, 0); got != "[kept]" {
		t.Errorf("read-only store holds %v, want [kept]", got)
	}
}

// events returns actor "a"'s events in s from index from on.
func events(t *testing.T, s *Store, from uint64) string {
	t.Helper()
	var got []string
	if err := s.GetEvents(t.Context(), "a", from, 0, func(_ uint64, d []byte) error { got = append(got, string(d)); return nil }); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(got)
}

// openWatched opens a store at path and returns it with the file bbolt
// opened for it.
func openWatched(t *testing.T, path string) (*Store, *os.File) {
	t.Helper()
	var file *os.File
	s, err := open(t.Context(), path, nil, func(name string, flag int, mode os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, mode)
		file = f
		return f, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, file
}

// TestFailingFile_WritesFail closes the file descriptor under bbolt: the
// commit's write fails, and every writer of the batch gets an error instead
// of a silent success.
func TestFailingFile_WritesFail(t *testing.T) {
	ctx := t.Context()
	s, file := openWatched(t, filepath.Join(t.TempDir(), "store.db"))
	if err := s.PersistEvent(ctx, "a", 0, []byte("ok")); err != nil {
		t.Fatal(err)
	}
	file.Close() // the disk "goes away"

	const writers = 8
	errs := make(chan error, writers)
	for n := range writers {
		go func() { errs <- s.PersistEvent(ctx, fmt.Sprint("w", n), 1, []byte("lost?")) }()
	}
	for range writers {
		err := <-errs
		var se *durability.StoreError
		if !errors.As(err, &se) || se.Op != durability.OpPersistEvent || !errors.Is(err, os.ErrClosed) {
			t.Errorf("PersistEvent on a failing file: %v, want a StoreError wrapping os.ErrClosed", err)
		}
		if !durability.IsPermanent(err) {
			t.Errorf("PersistEvent on a closed file: %v, not permanent: the store never opens it again", err)
		}
	}
	if err := s.Close(); err == nil {
		t.Error("Close of a store whose file failed returned nil")
	}
	if err := s.PersistEvent(ctx, "a", 2, nil); !errors.Is(err, durability.ErrClosed) {
		t.Errorf("PersistEvent after Close: %v, want ErrClosed", err)
	}
}

// TestPersist_OutcomeKnownAfterCancel shows that a write handed to the committer is
// not abandoned when its context is cancelled afterwards.
func TestPersist_OutcomeKnownAfterCancel(t *testing.T) {
	s, _ := openTemp(t, nil)
	defer s.Close()
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	results := make([]error, 64)
	for i := range results {
		wg.Go(func() { results[i] = s.PersistEvent(ctx, "c", uint64(i), []byte("x")) })
	}
	cancel()
	wg.Wait()
	stored := map[uint64]bool{}
	if err := s.GetEvents(t.Context(), "c", 0, 0, func(i uint64, _ []byte) error { stored[i] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	for i, err := range results {
		if (err == nil) != stored[uint64(i)] {
			t.Errorf("event %d: PersistEvent returned %v but stored=%v", i, err, stored[uint64(i)])
		}
	}
}

// TestReplay_BatchedCommits commits batches of several writes, some split
// over more than one log value, crashes, and checks that the reopened store
// holds every write in order.
func TestReplay_BatchedCommits(t *testing.T) {
	defer func(old int) { maxLogValueSize = old }(maxLogValueSize)
	maxLogValueSize = 100 // a few records per value
	path := filepath.Join(t.TempDir(), "batched.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Stop the committer and commit batches directly, as it would.
	s.mu.Lock()
	s.closed = true
	close(s.writes)
	s.mu.Unlock()
	<-s.committerDone
	var batch []*write
	for i := range uint64(10) {
		for _, name := range []string{"a", "b"} {
			rec := record{kind: putEvent, name: name, index: i, data: fmt.Appendf(nil, "%s%d", name, i)}
			batch = append(batch, testWrite(rec))
		}
	}
	snap := record{kind: putSnapshot, compact: true, name: "a", index: 4, data: []byte("snap 4")}
	batch = append(batch, testWrite(snap))
	for _, part := range [][]*write{batch[:7], batch[7:]} {
		if err := s.appendLog(part, nil); err != nil {
			t.Fatal(err)
		}
	}
	if s.nextSeq <= 2 {
		t.Fatalf("batches took %d log values; the test would not split them", s.nextSeq)
	}
	if err := s.db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(path, nil)
	if err != nil {
		t.Fatalf("reopen after crash: %v", err)
	}
	defer s.Close()
	ctx := t.Context()
	read := func(name string) string {
		var got []string
		if err := s.GetEvents(ctx, name, 0, 0, func(i uint64, d []byte) error {
			got = append(got, fmt.Sprintf("%d:%s", i, d))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return strings.Join(got, " ")
	}
	if got, want := read("a"), "4:a4 5:a5 6:a6 7:a7 8:a8 9:a9"; got != want {
		t.Errorf("a after replay = %s, want %s", got, want)
	}
	if got, want := read("b"), "0:b0 1:b1 2:b2 3:b3 4:b4 5:b5 6:b6 7:b7 8:b8 9:b9"; got != want {
		t.Errorf("b after replay = %s, want %s", got, want)
	}
	if got, ok, err := s.GetSnapshot(ctx, "a"); err != nil || !ok || got.Index != 4 || string(got.Data) != "snap 4" {
		t.Errorf("snapshot after replay = %+v, %v, %v", got, ok, err)
	}
}

// TestPersistEvents_OneLogEntry checks that a batch is one write: one log
// entry, also when it is split over several log values, and that a crash
// after it replays the whole batch.
func TestPersistEvents_OneLogEntry(t *testing.T) {
	defer func(old int) { maxLogValueSize = old }(maxLogValueSize)
	s, path := openTemp(t, nil)
	ctx := t.Context()
	batch := make([][]byte, 50)
	for k := range batch {
		batch[k] = fmt.Appendf(nil, "e%d", k)
	}
	before := s.nextSeq
	if err := s.PersistEvents(ctx, "a", 0, batch); err != nil {
		t.Fatal(err)
	}
	if got := s.nextSeq - before; got != 1 {
		t.Errorf("a batch of %d events took %d log values, want 1", len(batch), got)
	}
	maxLogValueSize = 100 // a few records per value
	before = s.nextSeq
	if err := s.PersistEvents(ctx, "b", 7, batch); err != nil {
		t.Fatal(err)
	}
	if got := s.nextSeq - before; got < 5 {
		t.Errorf("a batch of %d events over 100-byte values took %d log values", len(batch), got)
	}
	crash(t, s)
	maxLogValueSize = bolt.MaxValueSize

	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for name, first := range map[string]uint64{"a": 0, "b": 7} {
		var got []string
		if err := s.GetEvents(ctx, name, 0, 0, func(i uint64, d []byte) error {
			if i != first+uint64(len(got)) {
				return fmt.Errorf("index %d after %d events", i, len(got))
			}
			got = append(got, string(d))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(batch) || got[0] != "e0" || got[len(got)-1] != fmt.Sprint("e", len(batch)-1) {
			t.Errorf("%s after replay: %v", name, got)
		}
	}
}

// testWrite returns a write of recs as submit would hand it to the
// committer.
func testWrite(recs ...record) *write {
	w := &write{recs: recs, done: make(chan error, 1)}
	w.enc = encodeRecords(w.recs)
	return w
}

// TestDecodeFrames_Corrupt rejects a log value whose framing is cut short.
func TestDecodeFrames_Corrupt(t *testing.T) {
	rec := record{kind: putEvent, name: "a", index: 1, data: []byte("data")}
	v := encodeRecords([]record{rec, rec})
	var n int
	if err := decodeFrames(v, func(record) { n++ }); err != nil || n != 2 {
		t.Fatalf("decodeFrames(two records) = %d records, %v", n, err)
	}
	for _, cut := range []int{1, len(v) - 1} {
		if err := decodeFrames(v[:cut], func(record) {}); err == nil {
			t.Errorf("decodeFrames(first %d of %d bytes) = nil error", cut, len(v))
		}
	}
}

// TestOpen_FormatV1 opens a version-1 file: with an empty log it is taken
// and upgraded; with a log left by a killed process it is rejected.
func TestOpen_FormatV1(t *testing.T) {
	for _, withLog := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "v1.db")
		s, err := Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.PersistEvent(t.Context(), "a", 0, []byte("a0")); err != nil {
			t.Fatal(err)
		}
		crash(t, s)
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(func(tx *bolt.Tx) error {
			if !withLog {
				if err := tx.DeleteBucket(walBucket); err != nil {
					return err
				}
			}
			return tx.Bucket(metaBucket).Put(formatKey, []byte(formatVersionV1))
		}); err != nil {
			t.Fatal(err)
		}
		db.Close()
		s, err = Open(path, nil)
		if withLog {
			if err == nil {
				s.Close()
				t.Error("Open(version 1 with a log) = nil error")
			}
			continue
		}
		if err != nil {
			t.Fatalf("Open(version 1, empty log): %v", err)
		}
		var v string
		s.db.View(func(tx *bolt.Tx) error { v = string(tx.Bucket(metaBucket).Get(formatKey)); return nil })
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if v != formatVersion {
			t.Errorf("format after Open = %q, want %q", v, formatVersion)
		}
	}
}

// TestGroupCommit_WritersShareCommits checks that concurrent writers
// share commits: the committer waits for every writer inside a write call
// (a count, not a delay), so 64 writers with one write in flight each
// settle into commits of many writes. The writers start together; how
// many a commit takes still depends on when the scheduler runs them
// (under a loaded CI run, 6 a commit on average where a quiet machine
// gives about 64), so the test asks for at least 4 on average: without
// sharing, every write would be a commit of its own.
func TestGroupCommit_WritersShareCommits(t *testing.T) {
	s, _ := openTemp(t, &Options{NoSync: true})
	defer s.Close()
	const writers, each = 64, 20
	before := s.nextSeq
	var wg, ready sync.WaitGroup
	start := make(chan struct{})
	ready.Add(writers)
	for w := range writers {
		wg.Go(func() {
			ready.Done()
			<-start
			for i := range uint64(each) {
				if err := s.PersistEvent(t.Context(), fmt.Sprint("w", w), i, []byte("x")); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	ready.Wait()
	close(start)
	wg.Wait()
	commits := s.nextSeq - before
	if commits*4 > writers*each {
		t.Errorf("%d writes took %d commits: writers are not sharing them", writers*each, commits)
	}
	t.Logf("%d writes in %d commits", writers*each, commits)
}

// TestOpen_MissingFolder: a store whose folder is missing is not created,
// and the error names the store's path and the missing folder, not the
// temporary file a new store is laid out in.
func TestOpen_MissingFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "missing")
	path := filepath.Join(dir, "x.db")
	_, err := Open(path, nil)
	if err == nil {
		t.Fatal("Open in a missing folder succeeded")
	}
	if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, "the folder "+dir+" does not exist") || strings.Contains(msg, "creating") {
		t.Errorf("error %q does not name %s and its missing folder (or names the temporary file)", msg, path)
	}
}

// TestKeepHistory_GetSnapshotWhileCheckpointing: with KeepHistory, a
// snapshots bucket that holds a few snapshots is walked whole by
// GetSnapshot and compared with its summary; snapshots written, written
// again at the same index and deleted, checkpointed every few writes,
// below and above that bound, never read as damage, and GetSnapshot
// returns the last one written.
func TestKeepHistory_GetSnapshotWhileCheckpointing(t *testing.T) {
	ctx := t.Context()
	s, path := openTemp(t, &Options{KeepHistory: true, CheckpointOps: 3, NoSync: true})
	check := func(s *Store, index uint64, data []byte) {
		t.Helper()
		snap, ok, err := s.GetSnapshot(ctx, "a")
		if err != nil || !ok || snap.Index != index || !bytes.Equal(snap.Data, data) {
			t.Fatalf("GetSnapshot: %d %q %t %v, want %d %q", snap.Index, snap.Data, ok, err, index, data)
		}
	}
	var index uint64
	var data []byte
	for i := range uint64(3 * maxSummedSnapshots) {
		index, data = i, fmt.Appendf(nil, "state %d", i)
		if err := s.PersistSnapshot(ctx, "a", index, data); err != nil {
			t.Fatal(err)
		}
		check(s, index, data)
		data = fmt.Appendf(nil, "state %d written again", i)
		if err := s.PersistSnapshot(ctx, "a", index, data); err != nil {
			t.Fatal(err)
		}
		check(s, index, data)
		if i%4 == 3 {
			if err := s.DeleteSnapshots(ctx, "a", i-3); err != nil {
				t.Fatal(err)
			}
			check(s, index, data)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(s, index, data)
}
