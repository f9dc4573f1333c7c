//go:build unix

package workspace

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/polyweave/polyweave-go/workspace/sandbox"
)

// The signals that the sandbox's CPU time and file size limits kill with.
const sigXCPU, sigXFSZ = syscall.SIGXCPU, syscall.SIGXFSZ

// systemInheritEnv is what DefaultInheritEnv adds on this system: nothing.
var systemInheritEnv []string

// process is one running command: the shell (or the sandbox's helper),
// whose pid is also its process group id, a pidfd that becomes readable
// when the shell exits (for a sandbox, the end of the helper's report
// pipe plays that part), and the read ends of its output pipes.
type process struct {
	cmd            *exec.Cmd
	sb             *sandbox.Process // nil when unsandboxed; cmd is then the shell
	pgid           int
	pidfd          int        // unsandboxed: readable once the shell has exited
	waited         chan error // non-Linux: the result of the Wait that watchExit started
	stdout, stderr *stream
	// Unsandboxed, our copies of the output pipes' write ends, kept
	// until the pidfd says the shell has exited: the shell's exit then
	// wakes the drain loop once, rather than first for the end of the
	// pipes and then for the pidfd.
	outW, errW *os.File

	mu       sync.Mutex // guards the fields below and signalling the group
	finished bool       // the group was killed after the shell exited; send nothing more
	cause    stopCause  // the first reason to stop, if any

	// killedAtStart: the call ended just as the sandbox's helper started
	// the command, and the helper was killed (sandbox.ErrKilledAtStart);
	// the cause above says why.
	killedAtStart bool
	killLate      *time.Timer
}

// start starts the shell, in the sandbox when the workspace has one, in
// a new session otherwise, with our own pipes. The read ends stay out of
// the runtime's poller: the calling goroutine drains them and watches the
// shell (or the sandbox's helper) with one poll(2) loop, which costs no
// goroutines and no handoffs between them.
func (w *Workspace) start(ctx context.Context, command string) (*process, error) {
	var p *process
	var err error
	if w.sandbox != nil {
		p, err = w.startSandboxed(ctx, command)
	} else {
		p, err = w.startUnsandboxed(command)
	}
	if err != nil {
		return nil, err
	}
	if w.hookStarted != nil {
		w.hookStarted(p.cmd.Process.Pid)
	}
	p.pgid = p.cmd.Process.Pid
	if p.sb != nil {
		// The end of the helper's report pipe says it is done.
		p.pidfd = -1
		return p, nil
	}
	// The shell cannot be reaped before Wait, so its pid names it here.
	if err = p.watchExit(); err != nil {
		p.pidfd = -1
		p.kill()
		_ = p.wait()
		p.release()
		return nil, ownResourceError(err)
	}
	return p, nil
}

// startUnsandboxed starts the shell in a new session.
func (w *Workspace) startUnsandboxed(command string) (*process, error) {
	stdout, stderr, outW, errW, err := newStreams(w.opts.MaxOutputBytes)
	if err != nil {
		return nil, err
	}
	p := &process{stdout: stdout, stderr: stderr, outW: outW, errW: errW}
	p.cmd = exec.Command(w.shell, "-c", command)
	p.cmd.Dir = w.startDir()
	p.cmd.Env = w.env
	p.cmd.Stdin = w.devNull
	p.cmd.Stdout = outW
	p.cmd.Stderr = errW
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := p.cmd.Start(); err != nil {
		p.pidfd = -1
		p.release()
		return nil, ownResourceError(&shellError{err})
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
	if p.sb != nil {
		p.sb.Terminate()
	} else {
		_ = syscall.Kill(-p.pgid, syscall.SIGTERM)
	}
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
		exitFD, events := p.pidfd, int16(unix.POLLIN)
		if p.sb != nil {
			exitFD, events = p.sb.StatusFD(), 0 // its end, POLLHUP
		}
		if !exited {
			fds = append(fds, unix.PollFd{Fd: int32(exitFD), Events: events})
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
			case fd.Fd == int32(exitFD):
				if p.sb != nil && !p.sb.ReadStatus() {
					break // a report, not yet the end
				}
				exited = true
				p.kill()
				deadline = time.Now().Add(waitDelay)
				p.closeWriteEnds()
				if p.sb != nil && p.sb.Exited() {
					// Every process of the sandbox is dead: what is in
					// the pipes is all there will be.
					p.stdout.readToEnd(&scratch)
					p.stderr.readToEnd(&scratch)
				}
			case fd.Fd == int32(p.stdout.fd):
				p.stdout.read(&scratch)
			default:
				p.stderr.read(&scratch)
			}
		}
	}
}

// release closes the pidfd and the pipes.
func (p *process) release() {
	if p.pidfd >= 0 {
		unix.Close(p.pidfd)
		p.pidfd = -1
	}
	p.closeWriteEnds()
	p.stdout.close()
	p.stderr.close()
}

// closeWriteEnds closes our copies of the output pipes' write ends, so
// that the pipes end once no process of the command holds them.
func (p *process) closeWriteEnds() {
	for _, f := range []**os.File{&p.outW, &p.errW} {
		if *f != nil {
			(*f).Close()
			*f = nil
		}
	}
}

// signalName is "SIGKILL" for 9: the name the model and logs read.
func signalName(sig int) string {
	if name := unix.SignalName(syscall.Signal(sig)); name != "" {
		return name
	}
	return "signal " + strconv.Itoa(sig)
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
	p, err := cloexecPipe()
	if err != nil {
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
		n, err := unix.Read(s.fd, s.space(scratch))
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
		s.got(n)
	}
}

// readToEnd reads what the pipe holds, when no process can write to it
// any more, and ends the stream.
func (s *stream) readToEnd(scratch *[]byte) {
	if !s.ended {
		s.read(scratch)
		s.ended = true
	}
}

func (s *stream) close() {
	if s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
}
