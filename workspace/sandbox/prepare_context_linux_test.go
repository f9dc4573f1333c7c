//go:build linux

package sandbox

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/polyweave/polyweave-go/workspace/internal/sandboxhook"
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
	if err := p.RunContext(ctx, "/bin/sh", "echo ran > f", nil); !errors.Is(err, errGaveUp) || errors.Is(err, ErrKilledAtStart) {
		t.Fatalf("a hung hand-over whose context ended: %v; want the context's cause, and the command never started", err)
	}
	p.Release()
	if err := unix.Kill(p.Pid(), 0); err != unix.ESRCH {
		t.Errorf("the helper of a hand-over given up is still there (kill 0: %v)", err)
	}
}

// A context that ends after the helper said it starts the command (it
// forks the shell right after), before RunContext took note, is no
// longer a hand-over given up before the command ran: the command may
// have run (here it wrote to a FIFO first), so the error wraps
// ErrKilledAtStart with the context's cause, and Finish reports the
// helper killed.
func TestRunContextEndedAsTheCommandStarts(t *testing.T) {
	dir := t.TempDir()
	root, null := openRootAndNull(t, dir)
	p, err := Prepare(defaults(t, Config{}), root, null, null)
	if err != nil {
		t.Fatal(err)
	}
	started := filepath.Join(dir, "started")
	if err := unix.Mkfifo(started, 0o600); err != nil {
		t.Fatal(err)
	}
	fifo, err := unix.Open(started, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fifo)
	pidfd, err := unix.PidfdOpen(p.Pid(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pidfd)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sandboxhook.Checked = func(context.Context, int) {
		poll(t, unix.PollFd{Fd: int32(fifo), Events: unix.POLLIN}) // the command runs
		cancel(errGaveUp)
		poll(t, unix.PollFd{Fd: int32(pidfd), Events: unix.POLLIN}) // the helper was killed for it
	}
	defer func() { sandboxhook.Checked = nil }()
	err = p.RunContext(ctx, "/bin/sh", "echo ran > started; exec sleep 600", nil)
	if !errors.Is(err, ErrKilledAtStart) || !errors.Is(err, errGaveUp) {
		t.Fatalf("RunContext whose context ended as the command started: %v; want ErrKilledAtStart and the context's cause", err)
	}
	if _, err := p.Finish(); err == nil {
		t.Error("Finish of a sandbox killed as its command started: no error")
	}
	_ = p.Cmd.Wait()
}

// poll waits until fd is ready for its events, or fails t.
func poll(t *testing.T, fd unix.PollFd) {
	t.Helper()
	for {
		fds := []unix.PollFd{fd}
		_, err := unix.Poll(fds, -1)
		if err == nil && fds[0].Revents != 0 {
			return
		}
		if err != nil && err != unix.EINTR {
			t.Fatalf("poll: %v", err)
		}
	}
}
