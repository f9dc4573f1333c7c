package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/polyweave/polyweave-go/durability/boltstore"
)

// writeStore writes three actors with a snapshot and events each.
func writeStore(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := boltstore.Open(path, &boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, name := range []string{"alpha", "beta", "gamma"} {
		for i := range uint64(6) {
			if err := s.PersistEvent(ctx, name, i, fmt.Appendf(nil, "%s event %d with some payload", name, i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.PersistSnapshot(ctx, name, 3, fmt.Appendf(nil, "%s state at 3", name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func verify(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(t.Context(), append([]string{"verify"}, args...), &out, &errOut)
	return code, out.String() + errOut.String()
}

func TestVerify_Intact(t *testing.T) {
	path := writeStore(t)
	code, out := verify(t, path)
	if code != 0 {
		t.Fatalf("exit %d, want 0:\n%s", code, out)
	}
	for _, want := range []string{`actor "alpha": snapshot at 3, 3 events 3..5: intact`, `actor "gamma"`, "intact: 3 actors, 0 damaged"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestVerify_DamagedEvent changes one byte of one stored event: verify
// names the actor and the event, and lists the other actors as intact.
func TestVerify_DamagedEvent(t *testing.T) {
	path := writeStore(t)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The event's bytes may also linger in free pages (the log's, before
	// the checkpoint): change every copy.
	pattern := []byte("beta event 4 with")
	if bytes.Count(b, pattern) == 0 {
		t.Fatal("event not found in the file")
	}
	for from := 0; ; {
		i := bytes.Index(b[from:], pattern)
		if i < 0 {
			break
		}
		b[from+i+5] ^= 0x20
		from += i + 1
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := verify(t, path)
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	for _, want := range []string{`actor "beta": snapshot at 3, 2 events 3..5: DAMAGED`, "event 4 is damaged: checksum mismatch", `actor "alpha": snapshot at 3, 3 events 3..5: intact`, "DAMAGED: 3 actors, 1 damaged"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestVerify_Unreadable(t *testing.T) {
	path := writeStore(t)
	if err := os.Truncate(path, 8192); err != nil {
		t.Fatal(err)
	}
	code, out := verify(t, path)
	if code != 2 || !strings.Contains(out, "UNREADABLE") || !strings.Contains(out, "truncated") {
		t.Errorf("exit %d, want 2 and UNREADABLE ... truncated:\n%s", code, out)
	}
	empty := filepath.Join(t.TempDir(), "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := verify(t, empty); code != 2 || !strings.Contains(out, "empty") {
		t.Errorf("empty file: exit %d:\n%s", code, out)
	}
	if code, out := verify(t, filepath.Join(t.TempDir(), "missing.db")); code != 2 || !strings.Contains(out, "no such file") {
		t.Errorf("missing file: exit %d:\n%s", code, out)
	}
}

func TestVerify_Locked(t *testing.T) {
	path := writeStore(t)
	s, err := boltstore.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	code, out := verify(t, "-timeout", "1m", path)
	if code != 0 || !strings.Contains(out, "held by another open store") || !strings.Contains(out, "consistent copy") || !strings.Contains(out, "\nintact: ") {
		t.Errorf("exit %d, want 0 from a copy, naming the lock:\n%s", code, out)
	}
}

func TestUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(t.Context(), nil, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "usage") {
		t.Errorf("no arguments: exit %d, stderr %q", code, errOut.String())
	}
	if code := run(t.Context(), []string{"verify"}, &out, &errOut); code != 2 {
		t.Errorf("verify without a file: exit %d", code)
	}
}

// TestVerify_DamagedPageCostsOneActor zeroes a 4 KiB page of one actor's
// events (a torn or lost sector write): verify lists the other actors as
// intact and names the damaged one, exit 1, not the whole file
// unreadable.
func TestVerify_DamagedPageCostsOneActor(t *testing.T) {
	path := zeroActorPage(t)
	code, out := verify(t, path)
	if code != 1 || strings.Contains(out, "UNREADABLE") {
		t.Errorf("exit %d, want 1 (damage found) with the intact actors listed:\n%s", code, out)
	}
	for _, want := range []string{`actor "small1": 3 events 0..2: intact`, `actor "small2": 3 events 0..2: intact`, `readable: DAMAGED pages`, `page of actor "big"`, "DAMAGED: 3 actors, 1 damaged"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// TestVerify_ReportsTheLog verifies a held store whose log holds writes
// not yet checkpointed: each actor is reported as the store serves it,
// log included, and an actor only in the log is listed.
func TestVerify_ReportsTheLog(t *testing.T) {
	path := writeStore(t) // alpha, beta, gamma: snapshot at 3, events 3..5, checkpointed
	s, err := boltstore.Open(path, &boltstore.Options{CheckpointOps: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for i := uint64(6); i < 10; i++ {
		if err := s.PersistEvent(ctx, "alpha", i, []byte("later")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PersistEvent(ctx, "newbie", 0, []byte("first")); err != nil {
		t.Fatal(err)
	}
	code, out := verify(t, "-timeout", "1m", path) // held: verifies a consistent copy
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, want := range []string{`actor "alpha": snapshot at 3, 7 events 3..9 (4 from the log): intact`, `actor "newbie": 1 event at 0 (1 from the log): intact`, "intact: 4 actors, 0 damaged"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// TestVerify_FormatWithoutChecksums verifies a format "2" file, whose
// records carry no checksums, one of them changed: verify says that
// nothing could be checked and exits 3, never "intact".
func TestVerify_FormatWithoutChecksums(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v2.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		m, err := tx.CreateBucket([]byte("polyweave"))
		if err != nil {
			return err
		}
		if err := m.Put([]byte("format"), []byte("2")); err != nil {
			return err
		}
		if _, err := tx.CreateBucket([]byte("wal")); err != nil {
			return err
		}
		actors, err := tx.CreateBucket([]byte("actors"))
		if err != nil {
			return err
		}
		a, err := actors.CreateBucket([]byte("alpha"))
		if err != nil {
			return err
		}
		ev, err := a.CreateBucket([]byte("events"))
		if err != nil {
			return err
		}
		// The value as damage left it: no checksum can tell.
		return ev.Put(binary.BigEndian.AppendUint64(nil, 0), []byte("payload changed by a flipped bit"))
	})
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
	code, out := verify(t, path)
	if code != 3 || strings.Contains(out, "intact") || !strings.Contains(out, `records of format "2" carry no checksums`) || !strings.Contains(out, "NOT CHECKED: 1 actors") {
		t.Errorf("exit %d, want 3, saying the records could not be checked:\n%s", code, out)
	}
	if !strings.Contains(usage, "3 nothing damaged found, but the format's records carry no checksums") {
		t.Error("the usage does not document exit status 3")
	}
}

// TestVerify_NotAStoreFile gives a folder as the store: verify says it is
// not a store file, exit 2, rather than reporting damaged meta pages.
func TestVerify_NotAStoreFile(t *testing.T) {
	dir := t.TempDir()
	code, out := verify(t, dir)
	if code != 2 || !strings.Contains(out, "is a folder, not a store file") || strings.Contains(out, "meta page") {
		t.Errorf("exit %d, want 2 and \"is a folder\":\n%s", code, out)
	}
}

// TestVerify_Timeout refuses a -timeout that bounds nothing.
func TestVerify_Timeout(t *testing.T) {
	path := writeStore(t)
	for _, d := range []string{"0", "0s", "-1s"} {
		if code, out := verify(t, "-timeout", d, path); code != 2 || !strings.Contains(out, "must be positive") {
			t.Errorf("-timeout %s: exit %d, want 2 and a refusal:\n%s", d, code, out)
		}
	}
}

// TestVerify_DamagedMetaPage damages the newest meta page: verify reads
// the file from the other one and says so in its own words, not as a
// refusal that names a library option.
func TestVerify_DamagedMetaPage(t *testing.T) {
	path := writeStore(t)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The meta page with the higher transaction id (at byte 16+48 of each
	// 4 KiB meta page) is the newest.
	page := 0
	if binary.LittleEndian.Uint64(b[4096+64:]) > binary.LittleEndian.Uint64(b[64:]) {
		page = 1
	}
	b[page*4096+16+60] ^= 0xff // inside its checksum
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := verify(t, path)
	if code != 1 || strings.Contains(out, "Options.") || strings.Contains(out, "refused") || !strings.Contains(out, fmt.Sprintf("read from meta page %d", 1-page)) {
		t.Errorf("exit %d, want 1, saying which meta page was read:\n%s", code, out)
	}
}

// TestVerify_TimeoutCoversTheCopy verifies a held file with a -timeout
// that has passed by the time the lock wait ends: the copy of the held
// file, and the verify, are bounded by it too, so verify fails (exit 2)
// saying that it timed out, and leaves no copy behind.
func TestVerify_TimeoutCoversTheCopy(t *testing.T) {
	path := writeStore(t)
	s, err := boltstore.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	code, out := verify(t, "-timeout", "1ns", path)
	if code != 2 || !strings.Contains(out, "-timeout 1ns") {
		t.Errorf("exit %d, want 2 and a timeout naming -timeout:\n%s", code, out)
	}
	if left, err := os.ReadDir(tmp); err != nil || len(left) > 0 {
		t.Errorf("left in the temporary folder: %v %v", left, err)
	}
}

// TestVerify_Interrupted runs verify of a held file with its context
// ended (Ctrl-C): exit 2, saying why, and no copy left behind.
func TestVerify_Interrupted(t *testing.T) {
	path := writeStore(t)
	s, err := boltstore.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(errors.New("interrupt signal received"))
	var out bytes.Buffer
	if code := run(ctx, []string{"verify", path}, &out, &out); code != 2 || !strings.Contains(out.String(), "interrupt signal received") {
		t.Errorf("exit %d, want 2 saying it was interrupted:\n%s", code, out.String())
	}
	if left, err := os.ReadDir(tmp); err != nil || len(left) > 0 {
		t.Errorf("left in the temporary folder: %v %v", left, err)
	}
}

// TestUsage_Help: -h of a subcommand, as of the command, is help asked
// for: its usage line and flags on stdout, exit 0 (Go's flag.ExitOnError
// convention); a wrong flag is a usage error: the same on stderr, exit 2.
func TestUsage_Help(t *testing.T) {
	for _, cmd := range []string{"verify", "salvage"} {
		for _, h := range []string{"-h", "-help", "--help"} {
			var out, errOut bytes.Buffer
			code := run(t.Context(), []string{cmd, h}, &out, &errOut)
			if code != 0 || !strings.Contains(out.String(), "usage: polyweave-store "+cmd+" [-timeout D]") ||
				!strings.Contains(out.String(), "-timeout") || errOut.Len() != 0 {
				t.Errorf("%s %s: exit %d, stdout %q, stderr %q; want 0, the usage line and the flags on stdout", cmd, h, code, out.String(), errOut.String())
			}
		}
		var out, errOut bytes.Buffer
		code := run(t.Context(), []string{cmd, "-bogus"}, &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), "-bogus") ||
			!strings.Contains(errOut.String(), "usage: polyweave-store "+cmd) || out.Len() != 0 {
			t.Errorf("%s -bogus: exit %d, stdout %q, stderr %q; want 2, the error and the usage line on stderr", cmd, code, out.String(), errOut.String())
		}
	}
}
