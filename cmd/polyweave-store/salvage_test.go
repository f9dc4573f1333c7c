package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/durability/boltstore"
)

func salvage(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(t.Context(), append([]string{"salvage"}, args...), &out, &errOut)
	return code, out.String() + errOut.String()
}

// unchanged fails t unless the file at path holds want.
func unchanged(t *testing.T, path string, want []byte) {
	t.Helper()
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
		t.Errorf("salvage changed %s (%v)", path, err)
	}
}

// zeroActorPage writes a store with actor "big" over many pages and two
// small actors, and zeroes the page of big's events that holds its event
// 150 (a torn or lost sector write).
func zeroActorPage(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := boltstore.Open(path, &boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pad := strings.Repeat("x", 200)
	if err := s.PersistSnapshot(ctx, "big", 0, []byte("big state at 0")); err != nil {
		t.Fatal(err)
	}
	for i := range uint64(300) {
		if err := s.PersistEvent(ctx, "big", i, fmt.Appendf(nil, "big event %03d %s", i, pad)); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"small1", "small2"} {
		for i := range uint64(3) {
			if err := s.PersistEvent(ctx, name, i, fmt.Appendf(nil, "%s event %d", name, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.LastIndex(b, []byte("big event 150 "))
	if at < 0 {
		t.Fatal("event not found in the file")
	}
	const ps = 4096
	clear(b[at/ps*ps : (at/ps+1)*ps])
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSalvage_DamagedPage salvages a file with a page of one actor's
// events zeroed: exit 1, the output names the actor, what was kept of it
// and that its damaged bucket was set aside and why; the new file
// verifies intact, the damaged file is unchanged.
func TestSalvage_DamagedPage(t *testing.T) {
	path := zeroActorPage(t)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "salvaged.db")
	code, out := salvage(t, path, dst)
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	for _, want := range []string{`actor "big"`, "set aside", `page of actor "big"`, "kept: snapshot at 0, ", "small1", "written to " + dst} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	unchanged(t, path, orig)
	if code, vout := verify(t, dst); code != 0 || !strings.Contains(vout, `actor "small1": 3 events 0..2: intact`) || !strings.Contains(vout, `actor "big": snapshot at 0,`) {
		t.Errorf("verify of the salvaged file: exit %d:\n%s", code, vout)
	}
}

// TestSalvage_DamagedEvent salvages a file with one stored event changed
// (its checksum no longer matches): exit 1, the actor keeps its snapshot
// and the events before the damaged one.
func TestSalvage_DamagedEvent(t *testing.T) {
	path := writeStore(t)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pattern := []byte("beta event 4 with")
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
	dst := filepath.Join(t.TempDir(), "salvaged.db")
	code, out := salvage(t, path, dst)
	if code != 1 || !strings.Contains(out, `actor "beta"`) || !strings.Contains(out, "event 4 is damaged: checksum mismatch") || !strings.Contains(out, "kept: snapshot at 3, 1 event at 3; dropped 2 records") {
		t.Fatalf("exit %d, want 1 naming beta's damage and what was kept:\n%s", code, out)
	}
	if !strings.Contains(out, `actor "alpha": intact, copied whole`) || strings.Contains(out, `actor "alpha": DAMAGED`) {
		t.Errorf("the intact actor is not reported copied whole:\n%s", out)
	}
	if code, vout := verify(t, dst); code != 0 || !strings.Contains(vout, `actor "alpha": snapshot at 3, 3 events 3..5: intact`) || !strings.Contains(vout, `actor "beta": snapshot at 3, 1 event at 3: intact`) {
		t.Errorf("verify of the salvaged file: exit %d:\n%s", code, vout)
	}
}

// TestSalvage_Intact salvages an intact file: exit 0, and the new file
// holds every actor whole.
func TestSalvage_Intact(t *testing.T) {
	path := writeStore(t)
	dst := filepath.Join(t.TempDir(), "copy.db")
	if code, out := salvage(t, path, dst); code != 0 || !strings.Contains(out, "nothing damaged") {
		t.Fatalf("exit %d, want 0:\n%s", code, out)
	}
	if code, vout := verify(t, dst); code != 0 || !strings.Contains(vout, `actor "gamma": snapshot at 3, 3 events 3..5: intact`) {
		t.Errorf("verify of the new file: exit %d:\n%s", code, vout)
	}
}

// TestSalvage_BrokenFreelistAndPage breaks the freelist page as well as
// a page of one actor: a writable Open refuses such a file (which pages
// are free cannot be told), and salvage recovers it into a new file.
func TestSalvage_BrokenFreelistAndPage(t *testing.T) {
	path := zeroActorPage(t)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The freelist page the newest meta page names (at byte 16+32 of each
	// meta page; the transaction id at 16+48).
	m := 0
	if binary.LittleEndian.Uint64(b[4096+64:]) > binary.LittleEndian.Uint64(b[64:]) {
		m = 4096
	}
	fl := binary.LittleEndian.Uint64(b[m+48:])
	clear(b[fl*4096 : (fl+1)*4096])
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := boltstore.Open(path, &boltstore.Options{NoSync: true}); err == nil || !strings.Contains(err.Error(), "salvage") {
		if err == nil {
			s.Close()
		}
		t.Fatalf("Open of the file with its freelist and a page broken: %v, want a refusal pointing to salvage", err)
	}
	dst := filepath.Join(t.TempDir(), "salvaged.db")
	code, out := salvage(t, path, dst)
	if code != 1 || !strings.Contains(out, "freelist page") || !strings.Contains(out, `actor "big"`) {
		t.Fatalf("exit %d, want 1 naming the freelist and actor big:\n%s", code, out)
	}
	t.Logf("salvage:\n%s", out)
	unchanged(t, path, b)
	if code, vout := verify(t, dst); code != 0 {
		t.Errorf("verify of the salvaged file: exit %d:\n%s", code, vout)
	}
}

// TestSalvage_Refused: wrong arguments, a new file that exists, the file
// itself as the new file, a file that is not a store, a held file: exit
// 2, nothing written, nothing changed.
func TestSalvage_Refused(t *testing.T) {
	path := writeStore(t)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	exists := filepath.Join(dir, "exists.db")
	if err := os.WriteFile(exists, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	notStore := filepath.Join(dir, "junk.db")
	if err := os.WriteFile(notStore, bytes.Repeat([]byte("junk"), 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "usage"},
		{[]string{path}, "usage"},
		{[]string{path, filepath.Join(dir, "a.db"), "extra"}, "usage"},
		{[]string{"-timeout", "0", path, filepath.Join(dir, "b.db")}, "must be positive"},
		{[]string{path, exists}, "exists"},
		{[]string{path, path}, "exists"},
		{[]string{notStore, filepath.Join(dir, "c.db")}, "cannot salvage"},
		{[]string{filepath.Join(dir, "missing.db"), filepath.Join(dir, "d.db")}, "no such file"},
		{[]string{path, filepath.Join(dir, "no", "such", "folder.db")}, "folder"},
	} {
		code, out := salvage(t, tc.args...)
		if code != 2 || !strings.Contains(out, tc.want) {
			t.Errorf("salvage %q: exit %d, want 2 and %q:\n%s", tc.args, code, tc.want, out)
		}
	}
	unchanged(t, path, orig)
	if b, err := os.ReadFile(exists); err != nil || string(b) != "keep me" {
		t.Errorf("the existing new file was changed: %q %v", b, err)
	}
	if left, err := os.ReadDir(dir); err != nil || len(left) != 2 {
		t.Errorf("left in %s: %v %v, want only the two files put there", dir, left, err)
	}

	s, err := boltstore.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if code, out := salvage(t, "-timeout", "1s", path, filepath.Join(dir, "e.db")); code != 2 || !strings.Contains(out, "held by") {
		t.Errorf("salvage of a held file: exit %d, want 2 and who holds it:\n%s", code, out)
	}
	if left, err := os.ReadDir(dir); err != nil || len(left) != 2 {
		t.Errorf("left in %s: %v %v, want only the two files put there", dir, left, err)
	}
}

// TestReport_LongControlName: an actor name of the longest length the
// store takes, full of control bytes, is reported by verify and salvage
// on one line of bounded length, escaped and clipped with a marker that
// gives its length, never whole.
func TestReport_LongControlName(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := boltstore.Open(path, &boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	name := "\x1b[31m" + strings.Repeat("\n\r", boltstore.MaxNameLen/2-3)
	if len(name) > boltstore.MaxNameLen {
		t.Fatalf("name of %d bytes, longer than the store takes", len(name))
	}
	if err := s.PersistEvent(context.Background(), name, 0, []byte("event 0")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	marker := fmt.Sprintf("(actor name of %d bytes, clipped)", len(name))
	for _, cmd := range [][]string{{"verify", path}, {"salvage", path, filepath.Join(t.TempDir(), "salvaged.db")}} {
		var out, errOut bytes.Buffer
		if code := run(t.Context(), cmd, &out, &errOut); code != 0 {
			t.Fatalf("%s: exit %d: %s%s", cmd[0], code, out.String(), errOut.String())
		}
		report := out.String() + errOut.String()
		if strings.ContainsAny(report, "\x1b\r") || !strings.Contains(report, marker) {
			t.Errorf("%s: the report holds raw control bytes or no %q: %.300q", cmd[0], marker, report)
		}
		for _, line := range strings.Split(report, "\n") {
			if len(line) > 2048 {
				t.Errorf("%s: a line of %d bytes: %.200q…", cmd[0], len(line), line)
			}
		}
	}
}
