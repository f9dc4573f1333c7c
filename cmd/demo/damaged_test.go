package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/internal/leakcheck"
)

// A -store whose session is damaged fails the run (exit 1), and the error
// names the commands that say what is damaged and recover what is not.
func TestRun_DamagedStoreNamesPolyweaveStore(t *testing.T) {
	defer leakcheck.VerifyNone(t)
	path := filepath.Join(t.TempDir(), "demo.db")
	dir := t.TempDir()
	if out, errOut, err := runInProcess(t, "-store", path, "-session", "s1", "-workspace", dir); err != nil {
		t.Fatalf("first run: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The greeting is in several of the session's records, and copies of
	// them linger in free pages: change every copy.
	pattern := []byte("Greetings from a Polyweave")
	if bytes.Count(b, pattern) == 0 {
		t.Fatal("the greeting is not in the store file")
	}
	for from := 0; ; {
		i := bytes.Index(b[from:], pattern)
		if i < 0 {
			break
		}
		b[from+i+3] ^= 0x20
		from += i + 1
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runInProcess(t, "-store", path, "-session", "s1", "-workspace", dir)
	if err == nil {
		t.Fatalf("the run on a damaged store succeeded\nstdout:\n%s\nstderr:\n%s", out, errOut)
	}
	var stderr strings.Builder
	if code := exitCode(err, &stderr); code != 1 {
		t.Errorf("exit %d, want 1: %v", code, err)
	}
	for _, want := range []string{"damaged", "go run ./cmd/polyweave-store verify " + path, "go run ./cmd/polyweave-store salvage " + path + " "} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the error lacks %q: %s", want, stderr.String())
		}
	}
}

// Damage the tool loop meets mid-run (the agent fails for good with the
// store's error) gets the same hint as damage found at start-up: the
// failure keeps the store's error for errors.Is, and the run's error
// names the commands.
func TestRun_DamageMidRunNamesPolyweaveStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "demo.db")
	cfg := config{store: path, session: "s1", timeout: time.Minute}
	d := &driver{cfg: cfg, tr: newTranscript(io.Discard, nil, time.Now())}
	damage := &durability.StoreError{Op: durability.OpGetEvents, Name: agent.SessionKey(agentName, "s1"),
		Err: durability.Damaged(path, durability.RecordEvent, 3, "checksum mismatch")}
	failed := &agent.FailedError{Agent: agentName, Session: "s1", Attempts: 1, Reason: damage.Error(),
		Err: fmt.Errorf("%w: the store failed for good: %w", agent.ErrPermanent, damage)}
	err := withDamageHint(cfg, d.failure(context.Background(), failed))
	var stderr strings.Builder
	if code := exitCode(err, &stderr); code != 1 {
		t.Errorf("exit %d, want 1: %v", code, err)
	}
	for _, want := range []string{"the agent failed", "event 3 is damaged", "go run ./cmd/polyweave-store verify " + path, "go run ./cmd/polyweave-store salvage " + path + " "} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the error lacks %q: %s", want, stderr.String())
		}
	}
	if n := strings.Count(stderr.String(), "event 3 is damaged"); n != 1 {
		t.Errorf("the damage is told %d times, want once: %s", n, stderr.String())
	}
}
