//go:build linux

package sandbox

import (
	"context"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

var errGaveUp = errors.New("the caller gave up")

// waitStopped waits until the process pid, a child of this process, is
// stopped: SIGSTOP is delivered asynchronously.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	var info unix.Siginfo
	// WNOWAIT leaves the stop to be seen by the Wait that reaps it.
	if err := unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED|unix.WNOWAIT, nil); err != nil {
		t.Fatalf("wait for the helper to stop: %v", err)
	}
}

// A set-up that hangs (here its helper is stopped before it could be
// ready) ends when the caller's context does: PrepareContext kills the
// helper, reaps it and returns the context's cause.
func TestPrepareContextStopsAHungSetUp(t *testing.T) {
	root, null := openRootAndNull(t, t.TempDir())
	cfg := defaults(t, Config{})
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var pid int
	hookLaunched = func(p int) {
		pid = p
		if err := unix.Kill(p, unix.SIGSTOP); err != nil {
			t.Errorf("stop the helper: %v", err)
		}
		waitStopped(t, p)
		cancel(errGaveUp) // the helper can never report now
	}
	defer func() { hookLaunched = nil }()
	p, err := PrepareContext(ctx, cfg, root, null, null)
	if p != nil || !errors.Is(err, errGaveUp) {
		t.Fatalf("a hung set-up whose context ended: %v, %v; want the context's cause", p, err)
	}
	if err := unix.Kill(pid, 0); err != unix.ESRCH {
		t.Errorf("the helper of a set-up given up is still there (kill 0: %v)", err)
	}
}

// A prepared sandbox that hangs as it is handed its command (its
// helper stopped) is given up when the context ends: RunContext kills
// the helper and returns the context's cause, and nothing runs.
func TestRunContextStopsAHungHandOver(t *testing.T) {
	dir := t.TempDir()
	root, null := openRootAndNull(t, dir)
	p, err := Prepare(defaults(t, Config{}), root, null, null)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	if err := unix.Kill(p.Pid(), unix.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitStopped(t, p.Pid())
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errGaveUp)
	if err := p.RunContext(ctx, "/bin/sh", "echo ran > f", nil); !errors.Is(err, errGaveUp) {
		t.Fatalf("a hung hand-over whose context ended: %v; want the context's cause", err)
	}
	p.Release()
	if err := unix.Kill(p.Pid(), 0); err != unix.ESRCH {
		t.Errorf("the helper of a hand-over given up is still there (kill 0: %v)", err)
	}
}
