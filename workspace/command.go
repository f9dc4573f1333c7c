package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// RunCommand runs in.Command with `sh -c` in the workspace directory and
// returns its exit code and output. See [RunCommandResult] for the shapes
// and exit codes.
//
// The shell starts in a new session, so it leads a new process group; its
// stdin is /dev/null and its environment is built from
// [Options.InheritEnv]. When the shell exits, or at the timeout or a
// cancellation (SIGTERM, then SIGKILL after KillGrace), the whole process
// group is killed, so nothing the command started in its group outlives
// the call. Output beyond MaxOutputBytes per stream is drained and
// dropped.
//
// The workspace directory is only the starting point: the shell can reach
// whatever the process's user can. A process that leaves the group (by
// calling setsid itself) is not killed; if it keeps the output pipes open,
// the call stops reading them after WaitDelay.
//
// The Go error is non-nil only when the command did not finish on its
// own terms: ctx done (before or during the run; the group is killed and
// the partial result returned) or the workspace closed (ErrClosed).
func (w *Workspace) RunCommand(ctx context.Context, in RunCommandInput) (RunCommandResult, error) {
	if err := w.enter(ctx, RunCommandToolName); err != nil {
		return RunCommandResult{}, err
	}
	defer w.calls.Done()

	if strings.TrimSpace(in.Command) == "" {
		return RunCommandResult{
			Error:  RunCommandToolName + ": " + string(ReasonEmptyCommand),
			Reason: ReasonEmptyCommand,
		}, nil
	}
	p, err := w.start(in.Command)
	if err != nil {
		w.log.Debug("run_command could not start", "command", in.Command, "err", err)
		return RunCommandResult{
			Error:  fmt.Sprintf("%s: %s: %v", RunCommandToolName, ReasonStartFailed, err),
			Reason: ReasonStartFailed,
		}, nil
	}

	// The shell is waited for in this goroutine, as exec.Cmd.Run would;
	// the timeout, ctx and Close act from their own callbacks.
	grace := w.opts.KillGrace
	timer := time.AfterFunc(w.opts.CommandTimeout, func() { p.terminate(stopTimeout, grace) })
	stopCtx := context.AfterFunc(ctx, func() { p.terminate(stopCancel, grace) })
	stopOnClose := context.AfterFunc(w.closed, func() { p.terminate(stopClose, grace) })
	p.awaitExit()
	timer.Stop()
	stopCtx()
	stopOnClose()

	res, cause := p.finish(w)
	res.Command = in.Command
	switch cause {
	case stopTimeout:
		res.TimedOut = true
		res.ExitCode = TimeoutExitCode
		res.Error = fmt.Sprintf("command timed out after %s and was killed", w.opts.CommandTimeout)
	case stopCancel:
		return res, fmt.Errorf("%s: %w", RunCommandToolName, context.Cause(ctx))
	case stopClose:
		return res, fmt.Errorf("%s: %w", RunCommandToolName, ErrClosed)
	}
	return res, nil
}

// stopCause says why a command was stopped before it exited on its own.
type stopCause int

const (
	stopNone stopCause = iota
	stopTimeout
	stopCancel
	stopClose
)

// process is one running command: the shell, whose pid is also its
// process group id, and the readers draining its output.
type process struct {
	cmd            *exec.Cmd
	pgid           int
	stdout, stderr *drain

	mu       sync.Mutex // guards the fields below and signalling the group
	reaped   bool       // the shell is reaped: pgid may name another group
	cause    stopCause  // the first reason to stop, if any
	killLate *time.Timer
}

// start starts the shell in a new session with our own pipes. The pipes
// are ours (not exec's) so that the shell can be waited for without
// waiting for its output to close, and the group killed right away.
func (w *Workspace) start(command string) (*process, error) {
	stdout, err := newDrain(w.opts.MaxOutputBytes)
	if err != nil {
		return nil, err
	}
	stderr, err := newDrain(w.opts.MaxOutputBytes)
	if err != nil {
		stdout.close()
		return nil, err
	}
	cmd := exec.Command(w.shell, "-c", command)
	cmd.Dir = w.dir
	cmd.Env = w.env
	cmd.Stdout = stdout.w
	cmd.Stderr = stderr.w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	// The child has its copies of the write ends (or never will); ours
	// must close so that the readers see EOF when the group is gone.
	stdout.w.Close()
	stderr.w.Close()
	if err != nil {
		stdout.close()
		stderr.close()
		return nil, err
	}
	p := &process{cmd: cmd, pgid: cmd.Process.Pid, stdout: stdout, stderr: stderr}
	go stdout.run()
	go stderr.run()
	return p, nil
}

// awaitExit waits for the shell to exit without reaping it: while the
// shell is an unreaped zombie its pid, which is the group id, cannot be
// reused, so signalling the group cannot hit an unrelated process.
func (p *process) awaitExit() {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, p.pgid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return
		}
	}
}

// terminate stops the command for cause: SIGTERM to the group now,
// SIGKILL after grace. Only the first cause counts, and nothing is sent
// once the shell has been reaped.
func (p *process) terminate(cause stopCause, grace time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped || p.cause != stopNone {
		return
	}
	p.cause = cause
	_ = syscall.Kill(-p.pgid, syscall.SIGTERM)
	p.killLate = time.AfterFunc(grace, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if !p.reaped {
			_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
		}
	})
}

// finish runs once the shell has exited: it kills whatever is left in the
// group, reaps the shell and collects the output. The output readers get
// WaitDelay after the kill; past it the pipes are held by a process
// outside the group and reading stops.
func (p *process) finish(w *Workspace) (RunCommandResult, stopCause) {
	p.mu.Lock()
	if err := syscall.Kill(-p.pgid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
		w.log.Warn("run_command: kill process group", "pgid", p.pgid, "err", err)
	}
	p.reaped = true
	if p.killLate != nil {
		p.killLate.Stop()
	}
	cause := p.cause
	p.mu.Unlock()

	if err := p.cmd.Wait(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			w.log.Warn("run_command: wait", "pid", p.pgid, "err", err)
		}
	}
	cut := !p.awaitDrains(w.opts.WaitDelay)
	p.stdout.close()
	p.stderr.close()

	res := RunCommandResult{
		Success:         true,
		Stdout:          p.stdout.String(),
		Stderr:          p.stderr.String(),
		StdoutTruncated: p.stdout.truncated(),
		StderrTruncated: p.stderr.truncated(),
		ExitCode:        exitCode(p.cmd.ProcessState),
	}
	if cut {
		res.Stderr += fmt.Sprintf("\n[output cut off: a process that left the command's process group kept the output open past %s]\n", w.opts.WaitDelay)
		w.log.Warn("run_command: output pipes held open after the process group was killed", "pgid", p.pgid)
	}
	return res, cause
}

// awaitDrains waits up to waitDelay for both output streams to end; past
// it, it cuts them and reports false.
func (p *process) awaitDrains(waitDelay time.Duration) bool {
	deadline := time.NewTimer(waitDelay)
	defer deadline.Stop()
	for _, d := range []*drain{p.stdout, p.stderr} {
		select {
		case <-d.done:
		case <-deadline.C:
			p.stdout.cut()
			p.stderr.cut()
			<-p.stdout.done
			<-p.stderr.done
			return false
		}
	}
	return true
}

// exitCode maps the shell's wait status to the seed's exit code, with
// 128+N for death by signal N as shells report it.
// A shell that could not be waited for reports -1.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// drain reads one output stream to its end, keeping the first max bytes
// and counting the rest. Its fields other than r and w belong to the
// reading goroutine until done is closed.
type drain struct {
	r, w    *os.File
	max     int
	buf     []byte
	total   int64
	stopped bool // reading stopped before EOF
	done    chan struct{}
}

func newDrain(max int) (*drain, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("output pipe: %w", err)
	}
	return &drain{r: r, w: w, max: max, done: make(chan struct{})}, nil
}

// run reads until EOF, an error, or cut; it closes done.
func (d *drain) run() {
	defer close(d.done)
	var scratch []byte
	for {
		var dst []byte
		if len(d.buf) < d.max {
			if len(d.buf) == cap(d.buf) {
				d.buf = slices.Grow(d.buf, min(max(512, cap(d.buf)), d.max-len(d.buf)))
			}
			dst = d.buf[len(d.buf):min(cap(d.buf), d.max)]
		} else {
			if scratch == nil {
				scratch = make([]byte, 64<<10)
			}
			dst = scratch
		}
		n, err := d.r.Read(dst)
		d.total += int64(n)
		if len(d.buf) < d.max {
			d.buf = d.buf[:len(d.buf)+n]
		}
		if err != nil {
			d.stopped = !errors.Is(err, io.EOF)
			return
		}
	}
}

// cut makes a running reader return with what it has read.
func (d *drain) cut() { _ = d.r.SetReadDeadline(time.Now()) }

// close releases both pipe ends; the reader must have returned or never
// started.
func (d *drain) close() {
	d.r.Close()
	d.w.Close()
}

func (d *drain) truncated() bool { return d.stopped || d.total > int64(len(d.buf)) }

// String returns the kept output as valid UTF-8: invalid bytes (and a
// sequence cut at the cap) become U+FFFD.
func (d *drain) String() string { return strings.ToValidUTF8(string(d.buf), "\uFFFD") }
