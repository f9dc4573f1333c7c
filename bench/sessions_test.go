package main

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
)

// TestFleetDrivers_SessionsDoNotWaitForEachOther holds session 0 in its
// first run until the other sessions have played all their runs: each
// session's runs follow one another without waiting for the others, as a
// host's sessions would (a barrier after every run would leave the bubble
// deadlocked, and synctest would fail the test).
func TestFleetDrivers_SessionsDoNotWaitForEachOther(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	synctest.Test(t, func(t *testing.T) {
		const n, runs = 3, 4
		othersDone := make(chan struct{})
		var mu sync.Mutex
		left := (n - 1) * runs
		d := newFleetDrivers(n, true, func(ctx context.Context, i, run int) (time.Duration, error) {
			if i == 0 && run == 1 {
				<-othersDone
				return time.Millisecond, nil
			}
			if i != 0 {
				mu.Lock()
				if left--; left == 0 {
					close(othersDone)
				}
				mu.Unlock()
			}
			return time.Duration(run) * time.Millisecond, nil
		})
		defer d.close()
		if err := d.drive(context.Background(), runs); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if d.runs[i] != runs || len(d.took[i]) != runs {
				t.Errorf("session %d played %d runs (%d timed), want %d", i, d.runs[i], len(d.took[i]), runs)
			}
		}
		if p := d.p99(); p != runs*time.Millisecond {
			t.Errorf("p99 %v, want %v", p, runs*time.Millisecond)
		}
		// A second batch goes on from each session's last run.
		d.resetLatencies()
		if err := d.drive(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		if d.runs[1] != runs+1 || len(d.took[1]) != 1 {
			t.Errorf("after a second batch session 1 played %d runs (%d timed), want %d (1)", d.runs[1], len(d.took[1]), runs+1)
		}
	})
}

// TestFleetDrivers_Error: a session's failed run ends its runs and drive
// returns the error, naming the session, once every driver is done.
func TestFleetDrivers_Error(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	errStray := errors.New("stray")
	d := newFleetDrivers(4, false, func(ctx context.Context, i, run int) (time.Duration, error) {
		if i == 2 && run == 2 {
			return 0, errStray
		}
		return time.Millisecond, nil
	})
	defer d.close()
	err := d.drive(context.Background(), 3)
	if !errors.Is(err, errStray) || err.Error() != "session 2: stray" {
		t.Fatalf("drive: %v, want session 2: stray", err)
	}
	if d.runs[2] != 2 || d.runs[0] != 3 || d.runs[3] != 3 {
		t.Errorf("runs played %v, want [3 3 2 3]", d.runs)
	}
}
