package workspace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

	// The shell is waited for, and its output drained, in this goroutine;
	// the timeout, ctx and Close act from their own callbacks.
	grace := w.opts.KillGrace
	timer := time.AfterFunc(w.opts.CommandTimeout, func() { p.terminate(stopTimeout, grace) })
	stopCtx := context.AfterFunc(ctx, func() { p.terminate(stopCancel, grace) })
	stopOnClose := context.AfterFunc(w.closed, func() { p.terminate(stopClose, grace) })
	res, cause := p.finish(w)
	timer.Stop()
	stopCtx()
	stopOnClose()
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
// process group id, a pidfd that becomes readable when it exits, and the
// read ends of its output pipes.
type process struct {
	cmd            *exec.Cmd
	pgid           int
	pidfd          int
	stdout, stderr *stream

	mu       sync.Mutex // guards the fields below and signalling the group
	finished bool       // the group was killed after the shell exited; send nothing more
	cause    stopCause  // the first reason to stop, if any
	killLate *time.Timer
}

// start starts the shell in a new session with our own pipes. The read
// ends stay out of the runtime's poller: the calling goroutine drains them
// and watches the shell with one poll(2) loop, which costs no goroutines
// and no handoffs between them.
func (w *Workspace) start(command string) (*process, error) {
	stdout, outW, err := newStream(w.opts.MaxOutputBytes)
	if err != nil {
		return nil, err
	}
	stderr, errW, err := newStream(w.opts.MaxOutputBytes)
	if err != nil {
		stdout.close()
		outW.Close()
		return nil, err
	}
	cmd := exec.Command(w.shell, "-c", command)
	cmd.Dir = w.dir
	cmd.Env = w.env
	cmd.Stdout = outW
	cmd.Stderr = errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	// The child has its copies of the write ends (or never will); ours
	// must close so that the reads see EOF once the group is gone.
	outW.Close()
	errW.Close()
	if err != nil {
		stdout.close()
		stderr.close()
		return nil, err
	}
	p := &process{cmd: cmd, pgid: cmd.Process.Pid, stdout: stdout, stderr: stderr}
	// The shell cannot be reaped before Wait, so its pid names it here.
	p.pidfd, err = unix.PidfdOpen(p.pgid, 0)
	if err != nil {
		p.pidfd = -1
		p.kill()
		_ = cmd.Wait()
		p.release()
		return nil, fmt.Errorf("pidfd_open (Linux 5.3 or later is needed): %w", err)
	}
	return p, nil
}

// terminate stops the command for cause: SIGTERM to the group now,
// SIGKILL after grace. Only the first cause counts, and nothing is sent
// once the group was killed after the shell exited.
func (p *process) terminate(cause stopCause, grace time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished || p.cause != stopNone {
		return
	}
	p.cause = cause
	_ = syscall.Kill(-p.pgid, syscall.SIGTERM)
	p.killLate = time.AfterFunc(grace, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if !p.finished {
			_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
		}
	})
}

// kill sends SIGKILL to the whole group and stops further signals. The
// shell must not have been reaped yet: while it is an unreaped zombie its
// pid, which is the group id, cannot be reused, so the signal cannot hit
// an unrelated group.
func (p *process) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
	p.finished = true
	if p.killLate != nil {
		p.killLate.Stop()
	}
}

// drain reads both output streams until the shell has exited and both
// have ended. When the shell exits the group is killed; the streams then
// get waitDelay to end, after which they are held open by a process that
// left the group, and drain stops reading and reports false.
func (p *process) drain(waitDelay time.Duration, log *slog.Logger) bool {
	var scratch []byte // shared sink for output past the caps
	fds := make([]unix.PollFd, 0, 3)
	exited := false
	var deadline time.Time
	for {
		fds = fds[:0]
		for _, s := range []*stream{p.stdout, p.stderr} {
			if !s.ended {
				fds = append(fds, unix.PollFd{Fd: int32(s.fd), Events: unix.POLLIN})
			}
		}
		if !exited {
			fds = append(fds, unix.PollFd{Fd: int32(p.pidfd), Events: unix.POLLIN})
		}
		if len(fds) == 0 {
			return true
		}
		timeout := -1
		if exited {
			left := time.Until(deadline)
			if left <= 0 {
				return false
			}
			timeout = int((left + time.Millisecond - 1) / time.Millisecond)
		}
		if _, err := unix.Poll(fds, timeout); err != nil {
			if err == unix.EINTR {
				continue
			}
			log.Warn("run_command: poll", "err", err)
			p.kill()
			return false
		}
		for _, fd := range fds {
			switch {
			case fd.Revents == 0:
			case fd.Fd == int32(p.pidfd):
				exited = true
				p.kill()
				deadline = time.Now().Add(waitDelay)
			case fd.Fd == int32(p.stdout.fd):
				p.stdout.read(&scratch)
			default:
				p.stderr.read(&scratch)
			}
		}
	}
}

// finish kills what is left, reaps the shell and builds the result.
func (p *process) finish(w *Workspace) (RunCommandResult, stopCause) {
	complete := p.drain(w.opts.WaitDelay, w.log)
	p.mu.Lock()
	cause := p.cause
	p.mu.Unlock()
	if err := p.cmd.Wait(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			w.log.Warn("run_command: wait", "pid", p.pgid, "err", err)
		}
	}
	p.release()

	res := RunCommandResult{
		Success:         true,
		Stdout:          p.stdout.String(),
		Stderr:          p.stderr.String(),
		StdoutTruncated: p.stdout.truncated(),
		StderrTruncated: p.stderr.truncated(),
		ExitCode:        exitCode(p.cmd.ProcessState),
	}
	if !complete {
		res.Stderr += fmt.Sprintf("\n[output cut off: a process that left the command's process group kept the output open past %s]\n", w.opts.WaitDelay)
		w.log.Warn("run_command: output pipes held open after the process group was killed", "pgid", p.pgid)
	}
	return res, cause
}

// release closes the pidfd and the pipes' read ends.
func (p *process) release() {
	if p.pidfd >= 0 {
		unix.Close(p.pidfd)
		p.pidfd = -1
	}
	p.stdout.close()
	p.stderr.close()
}

// exitCode maps the shell's wait status to the seed's exit code, with
// 128+N for death by signal N as shells report it. A shell that could not
// be waited for reports -1.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// stream is the read end of one output pipe and what was kept from it:
// the first max bytes, with the rest counted and dropped. It is used by
// one goroutine.
type stream struct {
	fd      int
	max     int
	buf     []byte
	total   int64
	ended   bool // EOF or a read error
	stopped bool // ended by an error, not EOF
}

// newStream makes a pipe and returns its read end as a stream (non-
// blocking, outside the runtime poller) and its write end for the child
// (blocking, as programs expect).
func newStream(max int) (*stream, *os.File, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, fmt.Errorf("output pipe: %w", err)
	}
	if err := unix.SetNonblock(p[0], true); err != nil {
		unix.Close(p[0])
		unix.Close(p[1])
		return nil, nil, fmt.Errorf("output pipe: %w", err)
	}
	return &stream{fd: p[0], max: max}, os.NewFile(uintptr(p[1]), "output"), nil
}

// read reads what the pipe holds now, until it would block or ends.
// Output past max goes to *scratch, allocated on first need.
func (s *stream) read(scratch *[]byte) {
	for {
		var dst []byte
		if len(s.buf) < s.max {
			if len(s.buf) == cap(s.buf) {
				s.buf = slices.Grow(s.buf, min(max(512, cap(s.buf)), s.max-len(s.buf)))
			}
			dst = s.buf[len(s.buf):min(cap(s.buf), s.max)]
		} else {
			if *scratch == nil {
				*scratch = make([]byte, 64<<10)
			}
			dst = *scratch
		}
		n, err := unix.Read(s.fd, dst)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return
		case err != nil:
			s.ended, s.stopped = true, true
			return
		case n == 0:
			s.ended = true
			return
		}
		s.total += int64(n)
		if len(s.buf) < s.max {
			s.buf = s.buf[:len(s.buf)+n]
		}
	}
}

func (s *stream) close() {
	if s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
}

// truncated reports whether output was dropped or not read to its end.
func (s *stream) truncated() bool {
	return s.stopped || !s.ended || s.total > int64(len(s.buf))
}

// String returns the kept output as valid UTF-8: invalid bytes (and a
// sequence cut at the cap) become U+FFFD.
func (s *stream) String() string { return strings.ToValidUTF8(string(s.buf), "\uFFFD") }
