package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/polyweave/polyweave-go/workspace/sandbox"
)

// The signals that the sandbox's CPU time and file size limits kill
// with, by their Linux numbers: the sandbox is Linux's, and Windows has
// neither.
const sigXCPU, sigXFSZ = 24, 25

// systemInheritEnv is what DefaultInheritEnv adds on Windows: what
// programs need to run there (SystemRoot for the system's DLLs and
// sockets, ComSpec and PATHEXT to start other programs, TEMP and TMP).
var systemInheritEnv = []string{"SystemRoot", "ComSpec", "PATHEXT", "TEMP", "TMP"}

// killedExitCode is the exit code of the processes of a job that is
// killed, as os.Process.Kill gives on Windows.
const killedExitCode = 1

// process is one running command: the shell, in a job object that holds
// every process it starts, and the read ends of its output pipes, each
// read by a goroutine of its own. There is no sandbox on Windows.
type process struct {
	cmd            *exec.Cmd
	sb             *sandbox.Process // always nil: there is no sandbox on Windows
	pgid           int              // the shell's pid, for the logs
	job            windows.Handle   // kills what is left in it when closed
	stdout, stderr *stream
	waitErr        error // the shell's Wait, once drain has reaped it

	mu       sync.Mutex // guards the fields below and terminating the job
	finished bool       // the job was killed after the shell exited
	cause    stopCause  // the first reason to stop, if any

	// killedAtStart: the call ended just as the sandbox's helper started
	// the command, and the helper was killed (sandbox.ErrKilledAtStart);
	// the cause above says why.
	killedAtStart bool
}

// start starts the shell in a job object of its own, with our own pipes.
// The shell starts suspended and is resumed once it is in the job, so
// that everything it starts is in the job too. A process cannot leave a
// job unless the job allows it, which this one does not.
func (w *Workspace) start(ctx context.Context, command string) (*process, error) {
	if w.sandbox != nil {
		// Never: sandbox.Prepare fails on Windows, so New leaves it nil.
		return w.startSandboxed(ctx, command)
	}
	stdout, stderr, outW, errW, err := newStreams(w.opts.MaxOutputBytes)
	if err != nil {
		return nil, err
	}
	p := &process{stdout: stdout, stderr: stderr}
	p.job, err = newJob()
	if err == nil {
		p.cmd = exec.Command(w.shell, "-c", command)
		p.cmd.Dir = w.dir
		p.cmd.Env = w.env
		p.cmd.Stdin = w.devNull
		p.cmd.Stdout = outW
		p.cmd.Stderr = errW
		p.cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: windows.CREATE_SUSPENDED}
		if err = p.cmd.Start(); err != nil {
			err = &shellError{err}
		}
	}
	// The shell has its copies of the write ends (or never will): the
	// pipes end when it and what it started have exited.
	outW.Close()
	errW.Close()
	if err != nil {
		p.release()
		return nil, err
	}
	p.pgid = p.cmd.Process.Pid
	if err := p.enterJob(); err != nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		p.release()
		return nil, err
	}
	if w.hookStarted != nil {
		w.hookStarted(p.pgid)
	}
	return p, nil
}

// newJob makes a job object that kills its processes when its last
// handle is closed.
func newJob() (windows.Handle, error) {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return 0, fmt.Errorf("CreateJobObject: %w", err)
	}
	info := windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION{
		BasicLimitInformation: windows.JOBOBJECT_BASIC_LIMIT_INFORMATION{
			LimitFlags: windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
		},
	}
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		windows.CloseHandle(job)
		return 0, fmt.Errorf("SetInformationJobObject: %w", err)
	}
	return job, nil
}

// enterJob puts the suspended shell into the job and resumes it. The
// shell cannot have exited, or its pid been reused: it has not run yet,
// and is not waited for.
func (p *process) enterJob() error {
	pid := uint32(p.pgid)
	h, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, pid)
	if err != nil {
		return fmt.Errorf("OpenProcess %d: %w", pid, err)
	}
	err = windows.AssignProcessToJobObject(p.job, h)
	windows.CloseHandle(h)
	if err != nil {
		return fmt.Errorf("AssignProcessToJobObject: %w", err)
	}
	return resumeProcess(pid)
}

// resumeProcess resumes the one thread of the suspended process pid.
func resumeProcess(pid uint32) error {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPTHREAD, 0)
	if err != nil {
		return fmt.Errorf("CreateToolhelp32Snapshot: %w", err)
	}
	defer windows.CloseHandle(snap)
	te := windows.ThreadEntry32{Size: uint32(unsafe.Sizeof(windows.ThreadEntry32{}))}
	for err = windows.Thread32First(snap, &te); err == nil; err = windows.Thread32Next(snap, &te) {
		if te.OwnerProcessID != pid {
			continue
		}
		th, err := windows.OpenThread(windows.THREAD_SUSPEND_RESUME, false, te.ThreadID)
		if err != nil {
			return fmt.Errorf("OpenThread %d of process %d: %w", te.ThreadID, pid, err)
		}
		_, err = windows.ResumeThread(th)
		windows.CloseHandle(th)
		if err != nil {
			return fmt.Errorf("ResumeThread %d of process %d: %w", te.ThreadID, pid, err)
		}
		return nil
	}
	return fmt.Errorf("resume process %d: no thread of it found", pid)
}

// terminate stops the command for cause: every process of the job is
// killed at once. Windows has no SIGTERM for a console program, so
// KillGrace does not apply. Only the first cause counts.
func (p *process) terminate(cause stopCause, _ time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished || p.cause != stopNone {
		return
	}
	p.cause = cause
	_ = windows.TerminateJobObject(p.job, killedExitCode)
}

// kill kills every process of the job and stops further terminates.
func (p *process) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = windows.TerminateJobObject(p.job, killedExitCode)
	p.finished = true
}

// drain waits for the shell to exit, kills what it left in its job, and
// waits for both output streams to end. They get waitDelay for that,
// after which a process outside the job holds them open (one that was
// handed a copy of a pipe's handle), and drain closes them and reports
// false.
func (p *process) drain(waitDelay time.Duration, _ *slog.Logger) bool {
	p.waitErr = p.cmd.Wait() // exec copies nothing: the pipes are ours
	p.kill()
	timer := time.NewTimer(waitDelay)
	defer timer.Stop()
	for _, s := range []*stream{p.stdout, p.stderr} {
		select {
		case <-s.done:
		case <-timer.C:
			p.stdout.close()
			p.stderr.close()
			return false
		}
	}
	return true
}

// wait returns the result of the shell's Wait in drain.
func (p *process) wait() error { return p.waitErr }

// release closes the job, which kills anything left in it, and the pipes.
func (p *process) release() {
	if p.job != 0 {
		windows.CloseHandle(p.job)
		p.job = 0
	}
	p.stdout.close()
	p.stderr.close()
}

// signalName names signal sig; only the sandbox, which Windows does not
// have, reports signals.
func signalName(sig int) string {
	return "signal " + strconv.Itoa(sig)
}

// stream is the read end of one output pipe, read by a goroutine of its
// own, and what was kept from it: the first max bytes, with the rest
// counted and dropped. The fields other than r and done belong to that
// goroutine until done is closed.
type stream struct {
	r       *os.File
	done    chan struct{} // closed when the goroutine has stopped reading
	max     int
	buf     []byte
	total   int64
	ended   bool // EOF or a read error
	stopped bool // ended by an error, not EOF
}

// newStream makes a pipe, starts reading its read end into a stream and
// returns the stream and the write end for the child.
func newStream(max int) (*stream, *os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("output pipe: %w", err)
	}
	s := &stream{r: r, done: make(chan struct{}), max: max}
	go s.readAll()
	return s, w, nil
}

// readAll reads the pipe until it ends, or fails when close cuts it off.
func (s *stream) readAll() {
	defer close(s.done)
	var scratch []byte
	for {
		n, err := s.r.Read(s.space(&scratch))
		s.got(n)
		switch {
		case errors.Is(err, io.EOF):
			s.ended = true
			return
		case err != nil:
			s.ended, s.stopped = true, true
			return
		}
	}
}

// close closes the read end, which stops a read under way, and waits for
// the goroutine to stop.
func (s *stream) close() {
	if s.r != nil {
		s.r.Close()
		<-s.done
		s.r = nil
	}
}
