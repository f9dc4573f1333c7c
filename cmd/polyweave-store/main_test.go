package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	code := run(append([]string{"verify"}, args...), &out, &errOut)
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
	code, out := verify(t, "-timeout", "100ms", path)
	if code != 0 || !strings.Contains(out, "held by another open store") || !strings.Contains(out, "consistent copy") || !strings.Contains(out, "\nintact: ") {
		t.Errorf("exit %d, want 0 from a copy, naming the lock:\n%s", code, out)
	}
}

func TestUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(nil, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "usage") {
		t.Errorf("no arguments: exit %d, stderr %q", code, errOut.String())
	}
	if code := run([]string{"verify"}, &out, &errOut); code != 2 {
		t.Errorf("verify without a file: exit %d", code)
	}
}
