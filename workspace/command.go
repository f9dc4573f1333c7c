package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/polyweave/polyweave-go/workspace/sandbox"
)

// RunCommand runs in.Command with `sh -c` in the workspace directory and
// returns its exit code and output. See [RunCommandResult] for the shapes
// and exit codes.
//
// With a sandbox (the default where the kernel allows it; see the
// package documentation) the command runs in a sandbox of its own, and
// everything in it dies when the shell exits, at the timeout or a
// cancellation (SIGTERM to every process, then SIGKILL after
// KillGrace), on Close, and with the host process. Setting a sandbox up
// costs a few milliseconds, so the workspace prepares the next
// command's sandbox when a command has finished (and New keeps the one
// it probes with): a command on a workspace that was idle for that long
// starts about as fast as an unsandboxed one. [Workspace.Warm] prepares
// one ahead of the first command.
//
// Without a sandbox the shell starts in a new session, so it leads a new
// process group, which is killed in the same cases; a process that
// leaves the group (by calling setsid itself) is not killed, and if it
// keeps the output pipes open, the call stops reading them after
// WaitDelay. The workspace directory is then only the starting point:
// the shell can reach whatever the process's user can.
//
// On Windows a command runs in a job object instead of a process group,
// which no process can leave, and is killed without a grace period; see
// the package documentation.
//
// Either way stdin is /dev/null, the environment is built from
// [Options.InheritEnv], and output beyond MaxOutputBytes per stream is
// drained and dropped.
//
// The timeout ([Options.CommandTimeout]) counts from the call's start,
// setting the command's sandbox up included: a call whose sandbox is not
// ready by then answers TimedOut, with Success false (the command never
// ran), and the set-up is stopped.
//
// The Go error is non-nil only when the command did not finish on its
// own terms: ctx done (before or during the run; the command is killed
// and the partial result returned) or the workspace closed (ErrClosed).
// A call cancelled or closed while its sandbox was set up, or while it
// waited for the one prepared ahead, never starts its command: the
// set-up is stopped (its helper killed), and the result has Success
// false and StoppedBy saying why.
//
// A result that says the command never ran is exact: the sandbox's
// helper starts the command only after it has told the host that it
// does. A call that ends (timeout, ctx, Close) after the helper said so
// and before the host took note is answered as a command killed at that
// moment, with what it wrote: TimedOut and TimeoutExitCode at the
// timeout, StoppedBy cancelled or workspace closed otherwise, for it may
// have run briefly. Either way the helper is killed, and every process
// of the sandbox with it.
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
	if rf := checkCommand(runtime.GOOS, w.shell, in.Command); rf != nil {
		return RunCommandResult{Error: rf.Error, Reason: rf.Reason}, nil
	}
	// The timeout bounds the whole call: waiting for the lock shared with
	// the workspaces open on the directory, setting the command's sandbox
	// up (or waiting for the one prepared ahead) count. Close ends them,
	// and the command's hand-over to its sandbox, too.
	deadline := time.Now().Add(w.opts.CommandTimeout)
	setUp, cancelSetUp := context.WithCancelCause(ctx)
	stopSetUpOnClose := context.AfterFunc(w.closed, func() { cancelSetUp(ErrClosed) })
	startCtx, cancelStart := context.WithDeadline(setUp, deadline)
	var lockErr error
	if w.sandbox != nil {
		// From here to its end, the call keeps writes of the paths
		// hidden from commands out (hiddenWrite).
		if lockErr = w.commandBegins(startCtx); lockErr == nil {
			defer w.commandEnds()
		}
	}
	var p *process
	err := lockErr
	if err == nil {
		p, err = w.start(startCtx, in.Command)
	}
	// Only a sandboxed start waits (for its sandbox): an unsandboxed one
	// that fails as the deadline passes failed for its own reason.
	timedOut := err != nil && w.sandbox != nil && errors.Is(startCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	closed := err != nil && errors.Is(context.Cause(setUp), ErrClosed)
	if err == nil && p.killedAtStart {
		// The call ended just as the command started: it was killed
		// then, and is answered so (it may have run briefly).
		cause := stopTimeout
		switch {
		case ctx.Err() != nil:
			cause = stopCancel
		case errors.Is(context.Cause(setUp), ErrClosed):
			cause = stopClose
		}
		p.mu.Lock()
		p.cause = cause
		p.mu.Unlock()
	}
	cancelStart()
	stopSetUpOnClose()
	cancelSetUp(nil)
	switch {
	case timedOut && lockErr != nil:
		w.log.Warn("run_command: the lock on the workspace's root shared with the workspaces open on the directory was held exclusive elsewhere for the command's whole timeout",
			"timeout", w.opts.CommandTimeout)
		return RunCommandResult{Command: in.Command, TimedOut: true, StoppedBy: StoppedByTimeout, Reason: ReasonRootLocked, notReady: true,
			Error: fmt.Sprintf("%s: %s: it timed out: %s, for the whole of the call's timeout of %s (Options.CommandTimeout), "+
				"and the command never ran: try again", RunCommandToolName, ReasonRootLocked, hideLockBusy, w.opts.CommandTimeout)}, nil
	case timedOut:
		w.logNotReady("the command's sandbox was not set up within the command's timeout (Options.CommandTimeout)", err)
		return RunCommandResult{Command: in.Command, TimedOut: true, StoppedBy: StoppedByTimeout, Reason: ReasonStartFailed, notReady: true,
			Error: fmt.Sprintf("%s: %s: it timed out: its sandbox was not set up (or the command not handed to it) "+
				"within the call's timeout of %s (Options.CommandTimeout), and the command never ran: try again",
				RunCommandToolName, ReasonStartFailed, w.opts.CommandTimeout)}, nil
	case err != nil && ctx.Err() != nil:
		// Cancelled before the command started (while its sandbox was
		// made ready): it never runs.
		return RunCommandResult{Command: in.Command, StoppedBy: StoppedByCancel,
				Error: "command was cancelled before it started"},
			fmt.Errorf("%s: %w", RunCommandToolName, context.Cause(ctx))
	case err != nil && (closed || errors.Is(err, ErrClosed)):
		return RunCommandResult{Command: in.Command, StoppedBy: StoppedByClose,
				Error: "the workspace was closed before the command started"},
			fmt.Errorf("%s: %w", RunCommandToolName, ErrClosed)
	case err != nil && (errors.Is(err, sandbox.ErrResources) || errors.As(err, new(*resourceError))) && !removed(w.rootDir):
		what, logged := "its sandbox could not be set up", "the command's sandbox could not be set up"
		if w.sandbox == nil {
			what, logged = "it could not be started", "the command could not be started"
		}
		return w.wantedResource(what, logged, err), nil
	case err != nil:
		// The error is the host's, and may name its paths (a path to
		// hide, where the shell is): the log keeps it, the model reads
		// what happened in the workspace's terms. The command, which
		// may be long, is named by its beginning (as a message names a
		// path): a warning is not a copy of what the model sent.
		w.log.Warn("run_command could not start", "command", shownPath(in.Command), "err", err)
		return RunCommandResult{
			Error:  fmt.Sprintf("%s: %s: %s", RunCommandToolName, ReasonStartFailed, w.startFailure(err)),
			Reason: ReasonStartFailed,
		}, nil
	}

	// The shell is waited for, and its output drained, in this goroutine;
	// the timeout, ctx and Close act from their own callbacks.
	grace := w.opts.KillGrace
	timer := time.AfterFunc(time.Until(deadline), func() { p.terminate(stopTimeout, grace) })
	stopCtx := context.AfterFunc(ctx, func() { p.terminate(stopCancel, grace) })
	stopOnClose := context.AfterFunc(w.closed, func() { p.terminate(stopClose, grace) })
	res, cause := p.finish(w)
	if p.sb != nil {
		w.warmNext()
	}
	timer.Stop()
	stopCtx()
	stopOnClose()
	res.Command = in.Command
	res.Sandboxed = p.sb != nil
	switch cause {
	case stopTimeout:
		res.TimedOut = true
		res.StoppedBy = StoppedByTimeout
		res.ExitCode = TimeoutExitCode
		res.Error = fmt.Sprintf("command timed out after %s and was killed", w.opts.CommandTimeout)
	case stopCancel:
		res.StoppedBy = StoppedByCancel
		res.Error = "command was cancelled and killed"
		return res, fmt.Errorf("%s: %w", RunCommandToolName, context.Cause(ctx))
	case stopClose:
		res.StoppedBy = StoppedByClose
		res.Error = "the workspace was closed and the command killed"
		return res, fmt.Errorf("%s: %w", RunCommandToolName, ErrClosed)
	}
	return res, nil
}

// startFailure says why a command did not start (err, the host's
// error, whose text may name host paths) as the model reads it: what
// happened, in the workspace's terms, and what can be done, with no
// host path. The words of the system's error (an errno's) are said, its
// paths are not.
func (w *Workspace) startFailure(err error) string {
	var why string
	switch {
	case removed(w.rootDir):
		return string(ReasonWorkspaceGone) + "; no command can run in it, and this one never ran"
	case errors.Is(err, sandbox.ErrTooManyHidden):
		if text, ok := sandbox.InWorkspaceTerms(err); ok {
			return "its sandbox has " + text
		}
		why = "its sandbox would hide more paths than a sandbox can (sandbox.MaxHidden); no command can run until " +
			"matches of the paths to hide are removed, and commands cannot remove them: they must be removed by the host"
	case errors.Is(err, sandbox.ErrHiddenLinked):
		if text, ok := sandbox.InWorkspaceTerms(err); ok {
			return "its sandbox would show " + text + "; it never ran"
		}
		why = "a file to hide in the workspace has another hard link, by which commands would read it, and no " +
			"command runs until the host removes the other links"
	case errors.Is(err, sandbox.ErrHiddenMoved):
		why = "a path to hide in the workspace was moved or replaced from outside the file tools since the workspace " +
			"was opened, and no command runs until the host puts it back or opens the workspace again"
	case errors.Is(err, sandbox.ErrPreparedStale):
		why = "paths to hide changed twice as the command started (something keeps changing them: try again once it is done)"
	case errors.Is(err, sandbox.ErrConfig):
		why = "its sandbox cannot be set up as configured: a path to hide (Options.HidePaths, or the sandbox's " +
			"own lists) cannot be hidden as it is now (it leads to the workspace itself, say), and no command runs " +
			"until the host mends it"
	case errors.Is(err, sandbox.ErrStartFailed), errors.As(err, new(*shellError)):
		why = "its shell could not be started"
	case w.sandbox != nil:
		why = "its sandbox could not be set up"
	default:
		why = "it could not be started"
	}
	if errno, ok := errnoOf(err); ok {
		why += " (" + errno.Error() + ")"
	}
	return why + "; it never ran"
}

// shellError is the error of a shell that could not be started
// without the sandbox: it names the shell's path, which the model is
// not shown.
type shellError struct{ err error }

func (e *shellError) Error() string { return e.err.Error() }
func (e *shellError) Unwrap() error { return e.err }

// errnoOf returns the errno err wraps, if any.
func errnoOf(err error) (syscall.Errno, bool) {
	var errno syscall.Errno
	return errno, errors.As(err, &errno) && errno != 0
}

// resourceError is an error of the workspace's own part in starting a
// command (the output pipes, the pidfd that watches the shell, the fork
// of a shell run without the sandbox) for want of a resource: as with
// sandbox.ErrResources, the call may succeed when tried again, and the
// tool is not broken.
type resourceError struct{ err error }

func (e *resourceError) Error() string { return e.err.Error() }
func (e *resourceError) Unwrap() error { return e.err }

// ownResourceError is err, an error of the workspace's own part in
// starting a command, marked as a resourceError when a resource ran out
// (see ranOut).
func ownResourceError(err error) error {
	if ranOut(err) {
		return &resourceError{err}
	}
	return err
}

// ranOut reports whether err says that a resource of the host ran out:
// it wraps one of the errnos of sandbox.ErrResources.
func ranOut(err error) bool {
	for _, e := range []error{syscall.ENOSPC, syscall.ENOMEM, syscall.EAGAIN, syscall.EMFILE, syscall.ENFILE} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// resourceCause says which resource ran out when a sandbox could not
// be set up for want of one (err wraps sandbox.ErrResources), by the
// errno the system failed with.
func resourceCause(err error) string {
	errno, ok := errnoOf(err)
	if !ok {
		return "a resource of the system ran out"
	}
	var cause string
	switch errno {
	case syscall.ENOSPC:
		cause = "the host user's quota of namespaces is used up, or the kernel's limit on mounts reached"
	case syscall.EAGAIN:
		cause = "no more processes or threads could be started: the host user's limit, or the system's, is reached"
	case syscall.ENOMEM:
		cause = "the system is out of memory"
	case syscall.EMFILE:
		cause = "the host process has as many files open as its limit allows"
	case syscall.ENFILE:
		cause = "the system's table of open files is full"
	default:
		return errno.Error()
	}
	return cause + " (" + errno.Error() + ")"
}

// resourceRemedy says when trying again may help, for a want of the
// resource err says ran out.
func resourceRemedy(err error) string {
	if errno, _ := errnoOf(err); errno == syscall.ENOSPC {
		return "once other sandboxes (of this or other workspaces) have ended"
	}
	return "later"
}

// wantedResource is the result of a command that never ran because it,
// or its sandbox, could not be started for want of a resource (err,
// the host's error): unavailable, which no circuit breaker counts, and
// logged as a warning. what says in the model's terms what could not
// be done, logged in the log's.
func (w *Workspace) wantedResource(what, logged string, err error) RunCommandResult {
	w.logNotReady(logged+" for want of a resource", err)
	return RunCommandResult{
		Error: fmt.Sprintf("%s: %s: %s for want of a resource: %s; it never ran: try again %s",
			RunCommandToolName, ReasonStartFailed, what, resourceCause(err), resourceRemedy(err)),
		Reason:   ReasonStartFailed,
		notReady: true,
	}
}

// logNotReady warns that a command never ran because its sandbox was not
// set up, or it could not be started for want of a resource (what, err;
// the command, which may be long, is not logged): its call is answered
// unavailable, which no circuit breaker counts, so the log is where the
// host learns of a sandbox that can never be set up.
func (w *Workspace) logNotReady(what string, err error) {
	w.log.Warn("run_command: "+what+"; the command never ran, and its call is answered "+
		"unavailable, which run_command's circuit breaker does not count", "err", err)
}

// MaxCommandBytes is the longest command run_command takes on Unix:
// the kernel's limit on one argument of a program (MAX_ARG_STRLEN, 128
// KiB, with its terminating NUL), which the command is to `sh -c`. On
// Windows [MaxWindowsCommandLine] applies instead.
const MaxCommandBytes = 128<<10 - 1

// MaxWindowsCommandLine is the longest command line, in UTF-16 code
// units, that Windows starts a program with (CreateProcess: 32767 with
// its terminating NUL). On Windows run_command refuses a command whose
// whole line, `shell -c command` with each argument quoted as os/exec
// quotes it (a command with a blank is put in quotes, a quote in it is
// preceded by a backslash, and so are the backslashes before a quote),
// is longer: about 32 000 characters of plain text, fewer with quotes.
const MaxWindowsCommandLine = 32767 - 1

// checkCommand refuses, before anything starts, a command no shell can
// be given on goos: one with a NUL byte (a program's argument ends at
// the first), or one past the system's limit (see commandLimit).
func checkCommand(goos, shell, command string) *RunCommandResult {
	if strings.IndexByte(command, 0) >= 0 {
		return &RunCommandResult{Reason: ReasonCommandNUL, Error: fmt.Sprintf("%s: %s: a shell's command line "+
			"ends at the first NUL; remove it (printf '\\0' writes one)", RunCommandToolName, ReasonCommandNUL)}
	}
	size, max, what := commandLimit(goos, shell, command)
	if size > max {
		return &RunCommandResult{Reason: ReasonCommandTooLong, Error: fmt.Sprintf("%s: %s: %d %s, at most %d "+
			"(the system's limit); write long content to a file with write_file and run that",
			RunCommandToolName, ReasonCommandTooLong, size, what, max)}
	}
	return nil
}

// commandLimit returns the size of command as the system goos counts it
// when it starts shell -c command, the most it takes, and what it
// counts: on Windows the whole command line in UTF-16 code units
// ([MaxWindowsCommandLine]), elsewhere the command's bytes
// ([MaxCommandBytes]).
func commandLimit(goos, shell, command string) (size, max int, what string) {
	if goos == "windows" {
		size = windowsArgLen(shell) + len(" -c ") + windowsArgLen(command)
		// The shell's path counts, but is the host's: it is not said.
		return size, MaxWindowsCommandLine, "UTF-16 characters in the Windows command line (the shell's path, -c and the command, quoted)"
	}
	return len(command), MaxCommandBytes, "bytes"
}

// windowsArgLen is the length in UTF-16 code units of s as an argument
// of a Windows command line, quoted as os/exec (syscall.EscapeArg) does:
// "" when empty; otherwise a quote is preceded by a backslash, and so is
// each backslash right before a quote; and s is put in quotes when it
// holds a blank, each backslash at its end then doubled. Escaping adds
// only ASCII.
func windowsArgLen(s string) int {
	if s == "" {
		return 2
	}
	n := 0
	for _, r := range s { // an invalid byte is U+FFFD, one unit
		n++
		if r >= 0x10000 {
			n++ // a surrogate pair
		}
	}
	quoted := strings.ContainsAny(s, " \t")
	if quoted {
		n += 2
	}
	if !strings.ContainsAny(s, `"\`) {
		return n
	}
	slashes := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			slashes++
		case '"':
			n += slashes + 1
			slashes = 0
		default:
			slashes = 0
		}
	}
	if quoted {
		n += slashes
	}
	return n
}

// stopCause says why a command was stopped before it exited on its own.
type stopCause int

const (
	stopNone stopCause = iota
	stopTimeout
	stopCancel
	stopClose
)

// startSandboxed hands the command to a prepared sandbox: the one made
// ready ahead of this call when there is one, a new one otherwise.
func (w *Workspace) startSandboxed(ctx context.Context, command string) (*process, error) {
	h, err := w.takePrepared(ctx)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		// Cancelled while the sandbox was taken: the command never
		// starts, and the sandbox waits for the next one.
		w.putBack(h)
		return nil, err
	}
	if w.hookHandOver != nil {
		w.hookHandOver()
	}
	if err := h.sb.RunContext(ctx, w.shell, command, w.env); err != nil {
		if errors.Is(err, sandbox.ErrKilledAtStart) {
			return killedAtStart(h), nil
		}
		if ctx.Err() != nil {
			// Given up as the command was handed over, before the
			// helper started it: the helper was killed.
			h.release()
			return nil, ctx.Err()
		}
		// The sandbox prepared ahead is gone (its helper was killed
		// while it waited), or does not hide a path to hide that
		// appeared since (a file the file tools wrote, say): make a new
		// one.
		if errors.Is(err, sandbox.ErrPreparedStale) {
			w.log.Debug("run_command: preparing another sandbox", "err", err)
		} else {
			w.log.Warn("run_command: a prepared sandbox was lost; preparing another", "err", err)
		}
		h.release()
		if h, err = w.prepareNow(ctx); err != nil {
			return nil, err
		}
		if w.hookBeforeRun != nil {
			w.hookBeforeRun()
		}
		if err := h.sb.RunContext(ctx, w.shell, command, w.env); err != nil {
			if errors.Is(err, sandbox.ErrKilledAtStart) {
				return killedAtStart(h), nil
			}
			h.release()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errors.Is(err, sandbox.ErrPreparedStale) {
				// The error names the path that changed: the log keeps
				// it, the model is told only what to do.
				w.log.Warn("run_command: paths to hide changed twice as the command started", "err", err)
				return nil, fmt.Errorf("%w, twice as the command started (something keeps changing them: "+
					"try again once it is done)", sandbox.ErrPreparedStale)
			}
			return nil, err
		}
	}
	return &process{sb: h.sb, cmd: h.sb.Cmd, stdout: h.stdout, stderr: h.stderr}, nil
}

// killedAtStart is the process of a command whose call ended just as
// the sandbox's helper started it (sandbox.ErrKilledAtStart): the helper
// was killed, and the command with it, but the command may have run
// briefly. It is finished as any other command (what it wrote is read)
// and answered as one killed for that reason, which RunCommand sets.
func killedAtStart(h *prepared) *process {
	return &process{sb: h.sb, cmd: h.sb.Cmd, stdout: h.stdout, stderr: h.stderr, killedAtStart: true}
}

// preparation is a sandbox's set-up under way for the next command.
type preparation struct {
	done chan struct{} // closed when it ended
	err  error         // why it failed, nil if it succeeded; set before done is closed
}

// prepared is a sandbox set up and waiting for its command, with the
// read ends of the output pipes its helper holds.
type prepared struct {
	sb             *sandbox.Process
	stdout, stderr *stream
}

// newStreams makes the command's two output pipes: the streams that read
// them, each keeping max bytes, and the write ends for the child. On an
// error nothing is left open.
func newStreams(max int) (stdout, stderr *stream, outW, errW *os.File, err error) {
	if stdout, outW, err = newStream(max); err != nil {
		return nil, nil, nil, nil, ownResourceError(err)
	}
	if stderr, errW, err = newStream(max); err != nil {
		stdout.close()
		outW.Close()
		return nil, nil, nil, nil, ownResourceError(err)
	}
	return stdout, stderr, outW, errW, nil
}

// prepare sets up a new sandbox for one command, or gives up when ctx
// ends first (its helper is then killed).
func (w *Workspace) prepare(ctx context.Context) (*prepared, error) {
	if w.hookPrepare != nil {
		if err := w.hookPrepare(ctx); err != nil {
			return nil, err
		}
	}
	stdout, stderr, outW, errW, err := newStreams(w.opts.MaxOutputBytes)
	if err != nil {
		return nil, err
	}
	cfg := *w.sandbox
	w.hideMu.Lock()
	cfg.Resolved = w.currentHiddenIDs()
	w.hideMu.Unlock()
	sb, err := sandbox.PrepareContext(ctx, cfg, w.rootDir, outW, errW)
	// The helper has its copies of the write ends (or never will).
	outW.Close()
	errW.Close()
	if err != nil {
		stdout.close()
		stderr.close()
		return nil, err
	}
	return &prepared{sb: sb, stdout: stdout, stderr: stderr}, nil
}

// release kills an unused prepared sandbox and closes its pipes.
func (h *prepared) release() {
	h.sb.Release()
	h.stdout.close()
	h.stderr.close()
}

// takePrepared returns the sandbox prepared ahead, waiting for it when it
// is being prepared, or a new one when there is none; and starts
// preparing the next command's (see warmNext), so that a command finds its sandbox
// ready when the workspace was idle for as long as setting one up takes
// (see warmNext).
func (w *Workspace) takePrepared(ctx context.Context) (*prepared, error) {
	w.warmMu.Lock()
	if w.warm == nil && w.warming != nil {
		// One is on its way: it is sooner than a new one.
		prep := w.warming
		w.warmMu.Unlock()
		if w.hookWaitPrepared != nil {
			w.hookWaitPrepared()
		}
		select {
		case <-prep.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-w.closed.Done():
			return nil, ErrClosed
		}
		w.warmMu.Lock()
	}
	h := w.warm
	w.warm = nil
	w.warmMu.Unlock()
	if h != nil {
		return h, nil
	}
	return w.prepareNow(ctx)
}

// prepareNow prepares a sandbox for a command that found none ready,
// and keeps the outcome for Warm to report, unless the command gave up
// (ctx ended): the set-up was then cut short, which says nothing of
// the next.
func (w *Workspace) prepareNow(ctx context.Context) (*prepared, error) {
	h, err := w.prepare(ctx)
	if ctx.Err() == nil {
		w.warmMu.Lock()
		w.prepErr = err
		w.warmMu.Unlock()
	}
	return h, err
}

// putBack keeps h, taken for a command that did not start, for the next
// command, or releases it when one is ready already or the workspace is
// closing.
func (w *Workspace) putBack(h *prepared) {
	w.warmMu.Lock()
	if w.warm == nil && w.closed.Err() == nil {
		w.warm, h = h, nil
	}
	w.warmMu.Unlock()
	if h != nil {
		h.release()
	}
}

// warmNext starts preparing the sandbox of the next command. It is
// called when a command has finished rather than when it starts, so
// that setting up the next sandbox does not compete with the command
// for the CPU.
func (w *Workspace) warmNext() {
	w.warmMu.Lock()
	w.warmNextLocked()
	w.warmMu.Unlock()
}

// warmNextLocked starts preparing a sandbox for the next command, unless
// one is ready or on its way, or the workspace is closing. w.warmMu is
// held.
func (w *Workspace) warmNextLocked() {
	if w.warm != nil || w.warming != nil || w.closed.Err() != nil {
		return
	}
	prep := &preparation{done: make(chan struct{})}
	w.warming = prep
	w.warmers.Add(1)
	go func() {
		defer w.warmers.Done()
		// A preparation slower than a command's timeout is of no use to
		// any command; Close ends it too.
		ctx, cancel := context.WithTimeoutCause(w.closed, w.opts.CommandTimeout,
			fmt.Errorf("setting the sandbox up took longer than the command timeout (%s)", w.opts.CommandTimeout))
		h, err := w.prepare(ctx)
		cancel()
		if err != nil {
			w.log.Debug("run_command: preparing the next sandbox failed", "err", err)
		}
		w.warmMu.Lock()
		w.warming = nil
		w.prepErr = err
		prep.err = err
		close(prep.done)
		if h != nil && w.warm == nil && w.closed.Err() == nil {
			w.warm, h = h, nil
		}
		w.warmMu.Unlock()
		if h != nil {
			h.release()
		}
	}()
}

// Warm makes sure a sandbox for the next command is set up, and waits
// until it is ready and the helpers of earlier commands have finished
// exiting (or ctx is done). run_command prepares the next command's
// sandbox itself, each time a command finishes; Warm is for a program
// that wants its first command to start fast too, or for a benchmark
// that measures a command's start on an idle workspace rather than a
// sandbox's set-up. It does nothing for a workspace without a sandbox.
// When the sandbox could not be set up, it returns why (the next
// command would prepare another, and fail to start the same way, until
// what made it fail is gone: too many paths to hide, say).
//
// Warm returns nil once the preparation it waited for has set a sandbox
// up, even when a command took that sandbox meanwhile (the command
// prepares the next as it ends; Warm does not wait for that one). When
// the preparation failed, Warm reports the current state instead: nil
// when a sandbox is ready or a command set its own up since, and when a
// command started preparing the next one since, the outcome of that
// one, which it waits for. So it waits for more than one preparation
// only while they fail and, between them, commands set their own
// sandboxes up.
func (w *Workspace) Warm(ctx context.Context) error {
	if err := w.enter(ctx, "warm"); err != nil {
		return err
	}
	defer w.calls.Done()
	if w.sandbox == nil {
		return nil
	}
	w.warmMu.Lock()
	w.warmNextLocked()
	prep := w.warming
	w.warmMu.Unlock()
	for n := 0; prep != nil; n++ {
		if w.hookWarm != nil {
			w.hookWarm(n, false)
		}
		select {
		case <-prep.done:
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-w.closed.Done():
			return ErrClosed
		}
		if w.hookWarm != nil {
			w.hookWarm(n, true)
		}
		if prep.err == nil {
			// A sandbox was set up: the next command's, or, when a
			// command took it meanwhile, that command's, which prepares
			// the next as it ends.
			w.reapers.Wait()
			return nil
		}
		// It failed. A command may have mended what made it fail
		// meanwhile (setting a sandbox up itself) and, once done,
		// started preparing the next: that one is the state now.
		w.warmMu.Lock()
		prep = nil
		if w.warm == nil {
			prep = w.warming
		}
		w.warmMu.Unlock()
	}
	w.reapers.Wait() // bounded: each is a helper that has killed its sandbox and is exiting
	w.warmMu.Lock()
	ready, err := w.warm != nil, w.prepErr
	w.warmMu.Unlock()
	if !ready && err != nil && w.closed.Err() == nil {
		return fmt.Errorf("workspace: prepare the next command's sandbox: %w", err)
	}
	return nil
}

// finish kills what is left, reaps the shell (or the helper) and builds
// the result.
func (p *process) finish(w *Workspace) (RunCommandResult, stopCause) {
	complete := p.drain(w.opts.WaitDelay, w.log)
	p.mu.Lock()
	cause := p.cause
	p.mu.Unlock()
	var exit sandbox.Exit
	var sbErr error
	if p.sb != nil {
		// The helper is done: its report is complete, and everything in
		// the sandbox is dead. The helper itself is still exiting (the
		// kernel tears its namespaces down, which can take milliseconds):
		// it is reaped in the background, and Close waits for that.
		exit, sbErr = p.sb.Finish()
		// A helper that did not report the shell's exit (it was killed,
		// or failed) did not kill and reap the sandbox's other
		// processes first: they die with it, some time after its report
		// ended, and may run until then. Writes of the paths hidden
		// from commands wait for its reaping (hiddenWrite).
		lingers := sbErr != nil
		if w.hookFinished != nil {
			exit, sbErr = w.hookFinished(exit, sbErr)
		}
		w.reapLater(p.cmd, lingers)
	} else if err := p.wait(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			w.log.Warn("run_command: wait", "pid", p.pgid, "err", err)
		}
	}
	p.release()

	res := RunCommandResult{
		Success: true,
	}
	var outCut, errCut bool
	res.Stdout, outCut = p.stdout.text()
	res.Stderr, errCut = p.stderr.text()
	res.StdoutTruncated = outCut || p.stdout.truncated()
	res.StderrTruncated = errCut || p.stderr.truncated()
	sig := 0
	switch {
	case p.sb == nil:
		res.ExitCode, sig = exitStatus(p.cmd.ProcessState)
	case errors.Is(sbErr, sandbox.ErrStartFailed) && cause == stopNone && ranOut(sbErr):
		// The helper could not fork the shell (EAGAIN: the host's
		// processes or threads, never the sandbox's own limit, which
		// leaves room for far more than its first process), or the
		// host ran out of another resource as it started it: the
		// command never ran, and may when tried again, as when a
		// sandbox cannot be set up for want of a resource.
		return w.wantedResource("its shell could not be started in its sandbox",
			"the command's shell could not be started in its sandbox", sbErr), cause
	case errors.Is(sbErr, sandbox.ErrStartFailed) && cause == stopNone:
		// Nothing of the command ran: as an unsandboxed shell that
		// cannot be started. The error names the shell: the log keeps it.
		w.log.Warn("run_command could not start", "shell", w.shell, "err", sbErr)
		return RunCommandResult{
			Error:  fmt.Sprintf("%s: %s: %s", RunCommandToolName, ReasonStartFailed, w.startFailure(sbErr)),
			Reason: ReasonStartFailed,
		}, cause
	case sbErr != nil:
		// The helper was killed (by us, at the timeout or on cancel or
		// close, which the caller reports) or failed: the whole sandbox
		// went with it.
		res.ExitCode, sig = 128+int(syscall.SIGKILL), int(syscall.SIGKILL)
		if cause == stopNone {
			res.Error = "the command's sandbox failed and everything in it was killed"
			if errno, ok := errnoOf(sbErr); ok {
				res.Error += " (" + errno.Error() + ")"
			}
			res.StoppedBy = StoppedBySandbox
			w.log.Warn("run_command: sandbox", "err", sbErr)
		}
	case exit.Signal != 0:
		res.ExitCode, sig = 128+exit.Signal, exit.Signal
	default:
		res.ExitCode = exit.Code
	}
	if sig != 0 {
		res.Signal = signalName(sig)
	}
	if p.sb != nil && cause == stopNone {
		// A shell killed by, or reporting a child killed by, the signal
		// of a resource limit was stopped by that limit.
		switch res.ExitCode {
		case 128 + int(sigXCPU):
			res.StoppedBy = StoppedByCPULimit
			res.Error = fmt.Sprintf("the command used up its CPU time limit (%s per process) and was killed", w.sandbox.Limits.MaxCPUTime)
		case 128 + int(sigXFSZ):
			res.StoppedBy = StoppedByFileSizeLimit
			res.Error = fmt.Sprintf("the command wrote past the file size limit (%d bytes) and was killed", w.sandbox.Limits.MaxFileSize)
		default:
			switch {
			case res.ExitCode == 0:
			case saysAny(res.Stderr, outOfMemoryMessages):
				res.StoppedBy = StoppedByMemoryLimit
				res.Error = fmt.Sprintf("the command failed when it ran out of memory: the sandbox limits each process to %d MiB of address space",
					w.sandbox.Limits.MaxAddressSpace>>20)
			case saysAny(res.Stderr, cannotForkMessages):
				res.StoppedBy = StoppedByProcessLimit
				res.Error = fmt.Sprintf("the command failed when it could not start more processes: the sandbox allows %d",
					w.sandbox.Limits.MaxProcesses)
			}
		}
	}
	if !complete {
		// The note takes its room within the cap, as the model reads it.
		note := fmt.Sprintf("\n[output cut off: a process that left the command's process group kept the output open past %s]\n", w.opts.WaitDelay)
		kept, _ := cutEncoded(res.Stderr, w.opts.MaxOutputBytes-encodedLen(note))
		res.Stderr, _ = cutEncoded(kept+note, w.opts.MaxOutputBytes)
		res.StderrTruncated = true
		w.log.Warn("run_command: output pipes held open after the process group was killed", "pgid", p.pgid)
	}
	return res, cause
}

// reapLater reaps a sandbox's helper in the background. lingers says
// processes of the sandbox may outlive its report (see finish): until
// the helper is reaped, which the kernel does only once every process of
// its PID namespace is gone, writes of the paths hidden from commands
// are kept out, as while a command runs.
func (w *Workspace) reapLater(cmd *exec.Cmd, lingers bool) {
	w.reapers.Add(1)
	if lingers {
		w.commandLingers()
	}
	go func() {
		defer w.reapers.Done()
		if w.hookReap != nil {
			w.hookReap()
		}
		_ = cmd.Wait()
		if lingers {
			w.commandEnds()
		}
	}()
}

// commandBegins counts a sandboxed command under way (see hiddenWrite);
// commandEnds ends that. The first one of the workspace takes the lock
// it shares with the other workspaces open on the directory
// (tryLockHideShared), the last one releases it. While another holds
// that lock exclusive (a write of a hidden path there, of another
// workspace or process), the command tries again a little later, up to
// hideLockRetryMax apart, until ctx ends, whose cause it returns, with
// nothing counted: w.hideMu is not held meanwhile, and the workspace's
// own writes of hidden paths are answered, refused by the lock as long
// as it is held elsewhere.
func (w *Workspace) commandBegins(ctx context.Context) error {
	wait := hideLockRetryMin
	for first := true; ; first = false {
		w.hideMu.Lock()
		if w.commands > 0 || w.tryLockHideShared() {
			w.commands++
			w.hideMu.Unlock()
			return nil
		}
		w.hideMu.Unlock()
		if first && w.hookHideLockWait != nil {
			w.hookHideLockWait()
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-t.C:
		}
		wait = min(2*wait, hideLockRetryMax)
	}
}

// hideLockRetryMin and hideLockRetryMax bound the wait between two
// tries of a command's start for the lock held elsewhere (see
// commandBegins): a write of a hidden path holds it for milliseconds.
const (
	hideLockRetryMin = time.Millisecond
	hideLockRetryMax = 50 * time.Millisecond
)

// hideLockBusy says what held a command's start up while the lock on
// the root it shares with the other workspaces open on the directory
// was held exclusive (see commandBegins).
const hideLockBusy = "a workspace open on this directory (of another process, or of this one) was writing a path hidden from commands, " +
	"or a program of the host held the lock that keeps such writes and the commands apart"

// commandLingers counts a sandbox whose processes may still run as a
// command under way (see reapLater), while the command that ran in it
// is counted still: the lock commandBegins took is held already.
func (w *Workspace) commandLingers() {
	w.hideMu.Lock()
	w.commands++
	w.hideMu.Unlock()
}

func (w *Workspace) commandEnds() {
	w.hideMu.Lock()
	w.commands--
	if w.commands == 0 {
		w.unlockHide()
	}
	w.hideMu.Unlock()
}

// outOfMemoryMessages are what programs print when an allocation fails:
// the C library's strerror(ENOMEM), perl, Python, C++, Go, Java, Node.js,
// Rust, GNU tools. The kernel does not tell which process hit
// RLIMIT_AS: an allocation past it just fails, and the program decides
// what to do, most often saying so on stderr and exiting.
var outOfMemoryMessages = []string{"Cannot allocate memory", "cannot allocate memory", "Out of memory",
	"out of memory", "MemoryError", "std::bad_alloc", "OutOfMemoryError", "heap out of memory",
	"memory allocation of", "memory exhausted"}

// cannotForkMessages are what programs print when fork fails with
// EAGAIN at the process limit: strerror(EAGAIN), dash, bash.
var cannotForkMessages = []string{"Resource temporarily unavailable", "Cannot fork", "fork: retry"}

// saysAny reports whether s contains one of msgs.
func saysAny(s string, msgs []string) bool {
	for _, m := range msgs {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// exitStatus maps the shell's wait status to the seed's exit code, with
// 128+N for death by signal N as shells report it, and that signal. A
// shell that could not be waited for reports -1.
func exitStatus(ps *os.ProcessState) (code, signal int) {
	if ps == nil {
		return -1, 0
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), int(ws.Signal())
	}
	return ps.ExitCode(), 0
}

// space returns where the next read goes: the free part of buf, up to
// max, or once buf is full *scratch, allocated on first need.
func (s *stream) space(scratch *[]byte) []byte {
	if len(s.buf) < s.max {
		if len(s.buf) == cap(s.buf) {
			s.buf = slices.Grow(s.buf, min(max(512, cap(s.buf)), s.max-len(s.buf)))
		}
		return s.buf[len(s.buf):min(cap(s.buf), s.max)]
	}
	if *scratch == nil {
		*scratch = make([]byte, 64<<10)
	}
	return *scratch
}

// got counts n bytes read into what space returned, keeping them when
// they went to buf.
func (s *stream) got(n int) {
	s.total += int64(n)
	if len(s.buf) < s.max {
		s.buf = s.buf[:len(s.buf)+n]
	}
}

// truncated reports whether output was dropped or not read to its end.
func (s *stream) truncated() bool {
	return s.stopped || !s.ended || s.total > int64(len(s.buf))
}

// text returns the kept output as the model reads it: valid UTF-8
// (invalid bytes, and a sequence cut at the cap, become U+FFFD), cut
// where its JSON encoding, escapes included, would pass the cap; and
// whether that cut anything. So a NUL, which JSON spells \u0000, counts
// six bytes, and the cap bounds what reaches the model.
func (s *stream) text() (string, bool) {
	return cutEncoded(strings.ToValidUTF8(string(s.buf), "\uFFFD"), s.max)
}

// cutEncoded returns the longest prefix of the valid UTF-8 text t whose
// JSON string encoding (without HTML escapes, without the quotes) is at
// most max bytes, and whether it is shorter than t.
func cutEncoded(t string, max int) (string, bool) {
	if len(t) <= max/6 {
		return t, false // no byte encodes to more than six
	}
	n := 0
	for i := 0; i < len(t); {
		w, size := encodedWidth(t[i:])
		if n+w > max {
			return t[:i], true
		}
		n += w
		i += size
	}
	return t, false
}

// encodedLen is the length of the JSON string encoding of the valid
// UTF-8 text t, as cutEncoded counts it.
func encodedLen(t string) int {
	n := 0
	for i := 0; i < len(t); {
		w, size := encodedWidth(t[i:])
		n += w
		i += size
	}
	return n
}

// encodedWidth returns how many bytes JSON encodes the first character
// of t (valid UTF-8) to, and how many bytes it takes in t.
func encodedWidth(t string) (w, size int) {
	if c := t[0]; c < utf8.RuneSelf {
		return int(asciiWidth[c]), 1
	}
	r, size := utf8.DecodeRuneInString(t)
	if r == '\u2028' || r == '\u2029' {
		return 6, size // escaped by encoding/json
	}
	return size, size
}

// asciiWidth is how many bytes JSON encodes an ASCII byte to: \n, \r,
// \t, \" and \\ two, other control bytes \u00XX six (at most), the rest one.
var asciiWidth = func() (w [utf8.RuneSelf]uint8) {
	for c := range w {
		switch {
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
			w[c] = 2
		case c < 0x20:
			w[c] = 6
		default:
			w[c] = 1
		}
	}
	return w
}()
