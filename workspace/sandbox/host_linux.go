//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/polyweave/polyweave-go/workspace/internal/sandboxhook"
)

// Supported reports whether this build has a sandbox (Linux only).
const Supported = true

// helperTraceback keeps the runtime's stack traces out of the helper's
// stderr, which is the command's: should the helper crash, the command
// reads nothing of it (the host reports the failure).
const helperTraceback = "GOTRACEBACK=none"

// helperEnvExtra is added to the helper's environment (see race_linux.go).
var helperEnvExtra []string

// Process is a sandbox made by [Prepare] or [Start]: its helper, PID 1 of
// the command's namespaces, whose process group in the host is its pid.
type Process struct {
	Cmd    *exec.Cmd
	ctl    *os.File // write end of the control pipe
	status int      // read end of the report pipe (non-blocking once ready), -1 once closed
	buf    []byte   // what was read from it and not yet parsed
	eof    bool     // the report pipe reached its end: the helper is exiting
	last   report   // the last report, once eof
	prot   *Protections
	ran    bool // Run was called
	// targets is the Config's LinkTargets, told again at Run;
	// forgets is targets' count of Forget calls at the set-up.
	targets *LinkTargets
	forgets uint64
	// etc is where the links of EtcLinkDirs led at the set-up (see
	// etcLinked), around the workspace at wsPath: Run looks again.
	etc    []string
	wsPath string
}

// Pid is the helper's pid in the host; it leads its own process group
// there, and killing it kills every process of the command.
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

// Terminate asks the helper to send SIGTERM to every process of the
// command. Kill (SIGKILL to the helper) is what makes sure.
func (p *Process) Terminate() {
	_, _ = p.ctl.Write([]byte{ctlTerminate})
}

// Protections are those the helper reported once set up.
func (p *Process) Protections() *Protections { return p.prot }

// StatusFD is the read end of the helper's report pipe, for a caller
// that polls it with its other descriptors. It ends when the helper is
// done: after its last report, once every process of the sandbox is
// dead, or when the helper was killed. Its end (POLLHUP) is all a caller
// need wait for: the helper's reports come before it, so polling for
// POLLIN as well only wakes the caller once more. Call
// [Process.ReadStatus] when it is ready.
func (p *Process) StatusFD() int { return p.status }

// ReadStatus reads what the report pipe holds without blocking and
// reports whether it has ended. Once it has, the helper is exiting: the
// kernel is tearing its namespaces down, which can take milliseconds
// more, and need not be waited for to answer the call ([Process.Finish]
// gives the answer; the helper is reaped with Cmd.Wait when convenient).
// Whether every process of the command is dead by then is what
// [Process.Exited] says.
func (p *Process) ReadStatus() bool {
	for !p.eof {
		var tmp [512]byte
		n, err := unix.Read(p.status, tmp[:])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return false
		case err != nil || n == 0:
			p.eof = true
			for line := range bytes.SplitSeq(p.buf, []byte{'\n'}) {
				var r report
				if json.Unmarshal(line, &r) == nil {
					p.last = r
				}
			}
		default:
			p.buf = append(p.buf, tmp[:n]...)
		}
	}
	return true
}

// Exited reports whether the report pipe has ended (see
// [Process.ReadStatus]) after the helper reported that the command's
// shell exited. The helper reports that only once it has killed and
// reaped every other process of the sandbox, so everything the command
// wrote is then in the output pipes, to be read without waiting for
// their end: the helper holds its own copies of them until it exits.
// When the helper ended otherwise (it was killed, or failed), the other
// processes die with it, the last of them some time after the report
// pipe's end, and the output pipes end once they are all dead.
func (p *Process) Exited() bool {
	return p.eof && p.last.Phase == "exit" && p.last.Exit != nil
}

// Finish returns how the command's shell ended, as the helper reported
// it, or an error saying the helper could not report (killed, or its
// set-up failed). It waits for the report pipe to end (it has ended once
// ReadStatus said so, or once the helper exited) and closes the pipes.
func (p *Process) Finish() (Exit, error) {
	defer p.ctl.Close()
	for !p.ReadStatus() {
		fds := []unix.PollFd{{Fd: int32(p.status)}} // its end: POLLHUP
		if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
			break
		}
	}
	p.closeStatus()
	switch last := p.last; {
	case last.Phase == "exit" && last.Exit != nil:
		return *last.Exit, nil
	case last.Phase == "error" && last.StartFailed:
		return Exit{Code: -1}, last.carried(markedError{fmt.Errorf("sandbox: %s", last.Error), ErrStartFailed})
	case last.Phase == "error":
		return Exit{Code: -1}, last.carried(fmt.Errorf("sandbox: %s", last.Error))
	}
	return Exit{Code: -1}, errors.New("sandbox helper was killed before the command's shell exited")
}

func (p *Process) closeStatus() {
	if p.status >= 0 {
		unix.Close(p.status)
		p.status = -1
	}
}

// Start starts command with shell -c in a new sandbox rooted at the
// workspace directory root (the open directory the file tools use), with
// env as its whole environment and stdout/stderr as its output. It
// returns once the sandbox is set up and the command started, or with
// the set-up's error. cfg must have its defaults filled in. It is
// [Prepare] and [Process.Run] in one.
func Start(cfg Config, root *os.File, shell, command string, env []string, stdout, stderr *os.File) (*Process, error) {
	p, err := PrepareContext(context.Background(), cfg, root, stdout, stderr)
	if err != nil {
		return nil, err
	}
	if err := p.Run(shell, command, env); err != nil {
		p.Release()
		return nil, err
	}
	return p, nil
}

// Prepare starts a helper and has it set up a new sandbox, as Start
// does, without a command: the sandbox then waits, ready, for the one
// command [Process.Run] gives it. Setting up is most of what a
// sandboxed command costs (starting the helper, namespaces, mounts,
// Landlock), so a caller that prepares the next sandbox while it is idle
// makes its next command start about as fast as an unsandboxed one. A
// prepared sandbox that will not be used must be released
// ([Process.Release]).
func Prepare(cfg Config, root *os.File, stdout, stderr *os.File) (*Process, error) {
	return PrepareContext(context.Background(), cfg, root, stdout, stderr)
}

// PrepareContext is [Prepare] bounded by ctx: when ctx is done before
// the sandbox is ready (a set-up that hangs, on a file system that does
// not answer, say, or is slower than the caller can wait), the helper
// is killed, with everything in the sandbox, and reaped, and the error
// wraps ctx's cause.
func PrepareContext(ctx context.Context, cfg Config, root *os.File, stdout, stderr *os.File) (*Process, error) {
	return launch(ctx, setupRequest{Config: cfg}, root, stdout, stderr)
}

// hookLaunched, when set by tests, is called with the helper's pid once
// it started, before it is sent its set-up request.
var hookLaunched func(pid int)

// Run hands a prepared sandbox its command: shell -c command, with env as
// its whole environment. A sandbox runs one command; Run fails when
// called again, when the helper is gone (it was killed while it
// waited), or when a path to hide appeared or was replaced since the
// sandbox was prepared, or a link of [EtcLinkDirs] leads elsewhere
// ([ErrPreparedStale]): the caller then releases it and prepares
// another. The helper looks for the paths to hide
// again, from inside the sandbox and as a set-up does (a few Lstat
// calls per path to hide, a listing of each directory a pattern
// needs, and the places of [LinkTargets] as Run is called), checks
// that each is still covered (the root of a cover the set-up mounted,
// whatever inode the file there has: the cover goes when the file it
// covered is removed; a directory of the workspace the set-up pinned,
// and the host renamed since to a name to hide, is a mount's root but
// no cover), and answers before it starts the command: Run waits for
// that answer.
func (p *Process) Run(shell, command string, env []string) error {
	return p.RunContext(context.Background(), shell, command, env)
}

// RunContext is [Process.Run] bounded by ctx: when ctx is done before
// the helper answers (it looks again at what it must hide, which may
// hang as a set-up may), or as it answers, the helper is killed, with
// everything in the sandbox, and the error wraps ctx's cause. The
// command never ran then, and the caller releases the sandbox, as after
// any error of Run; except when ctx ended just as the helper started
// the command, after it said it does: the error then wraps
// [ErrKilledAtStart] too, for the command may have run briefly, and the
// caller finishes the Process as after a successful Run.
func (p *Process) RunContext(ctx context.Context, shell, command string, env []string) error {
	if p.ran {
		return errors.New("sandbox: a sandbox runs one command")
	}
	p.ran = true
	if p.ReadStatus() {
		return errors.New("sandbox: the prepared sandbox's helper is gone")
	}
	if p.targets.forgotten() != p.forgets {
		// It hides places the host has forgotten since: it would show
		// the command less than the next set-up does.
		return fmt.Errorf("%w: places links led to were forgotten since (LinkTargets.Forget)", ErrPreparedStale)
	}
	if now := etcLinked(EtcLinkDirs, p.wsPath); !slices.Equal(now, p.etc) {
		// Its Landlock domain lets commands read where the links led
		// then, which may no longer be the system's configuration.
		return fmt.Errorf("%w: where the links of EtcLinkDirs lead changed since (then: %s; now: %s)", ErrPreparedStale,
			placesText(p.etc), placesText(now))
	}
	line, err := json.Marshal(runRequest{Shell: shell, Command: command, Env: env, LinkTargets: p.targets.Paths()})
	if err != nil {
		return err
	}
	killed := p.killOnDone(ctx)
	if _, err := p.ctl.Write(append(line, '\n')); err != nil {
		return givenUp(ctx, killed, fmt.Errorf("sandbox: hand the command to its helper: %w", err))
	}
	// The helper looks again at what it must hide, and says whether the
	// command runs.
	answer, err := p.waitLine()
	var r report
	decodeErr := json.Unmarshal(answer, &r)
	if sandboxhook.Checked != nil && err == nil && r.Phase == "checked" {
		sandboxhook.Checked(ctx, p.Pid())
	}
	if killed() {
		// The helper starts the command only once it has said so, and
		// the report pipe ends (io.EOF) only once it is dead: any other
		// outcome leaves open that the command started. The helper
		// could instead wait for a go-ahead after saying so, which
		// would make the command unable to start once ctx ended; that
		// costs every command's start a round trip between the two
		// processes, to move a window of microseconds from one side to
		// the other: a command that may have run briefly is answered
		// as any command killed at that moment.
		if err == nil && r.Phase == "checked" || err != nil && err != io.EOF {
			return fmt.Errorf("%w (%w)", ErrKilledAtStart, context.Cause(ctx))
		}
		return givenUp(ctx, killed, err)
	}
	if err != nil {
		return fmt.Errorf("sandbox: the prepared sandbox's helper did not take the command (%v)", err)
	}
	if decodeErr != nil {
		return fmt.Errorf("sandbox helper: bad report %q", answer)
	}
	switch {
	case r.Phase == "checked":
		return nil
	case r.Stale && r.Linked:
		return r.carried(markedError{fmt.Errorf("%w: %s", ErrPreparedStale, r.Error), ErrHiddenLinked})
	case r.Stale:
		return r.carried(fmt.Errorf("%w: %s", ErrPreparedStale, r.Error))
	}
	p.buf = append(append(answer, '\n'), p.buf...) // for Finish
	return r.carried(fmt.Errorf("sandbox: %s", r.Error))
}

// placesText names places in an error, "none" when there are none.
func placesText(places []string) string {
	if len(places) == 0 {
		return "none"
	}
	return strings.Join(places, ", ")
}

// killOnDone kills the helper when ctx is done, until the returned
// function is first called; that function then says, each time, whether
// ctx ended first and the helper was killed.
func (p *Process) killOnDone(ctx context.Context) (killed func() bool) {
	stop := context.AfterFunc(ctx, func() { _ = p.Cmd.Process.Kill() })
	var once sync.Once
	var was bool
	return func() bool {
		once.Do(func() { was = !stop() })
		return was
	}
}

// givenUp is err, the error of a step of the helper, unless ctx ended
// and the helper was killed for it (killed, see killOnDone): the error
// then says so, with ctx's cause.
func givenUp(ctx context.Context, killed func() bool, err error) error {
	if killed() {
		return fmt.Errorf("sandbox: given up, the helper killed: %w", context.Cause(ctx))
	}
	return err
}

// waitLine is readLine on the report pipe once it is non-blocking: it
// polls it while it holds no whole line.
func (p *Process) waitLine() ([]byte, error) {
	for {
		line, err := p.readLine()
		if err != unix.EAGAIN {
			return line, err
		}
		fds := []unix.PollFd{{Fd: int32(p.status), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
			return nil, err
		}
	}
}

// Release stops a sandbox whose command will not run, or no longer
// matters: it kills the helper (and with it everything in the sandbox),
// reaps it and closes the pipes.
func (p *Process) Release() {
	_ = p.Cmd.Process.Kill()
	_ = p.Cmd.Wait()
	p.ctl.Close()
	p.closeStatus()
}

// Probe sets up a sandbox as Start would, without running anything, and
// says which protections it got. The error says why there is no sandbox
// at all.
func Probe(cfg Config, root *os.File) (Protections, error) {
	p, err := launch(context.Background(), setupRequest{Probe: true, Config: cfg}, root, nil, nil)
	if err != nil {
		return Protections{Missing: []string{err.Error()}}, err
	}
	_ = p.Cmd.Wait()
	p.ctl.Close()
	p.closeStatus()
	return *p.prot, nil
}

// launch starts the helper, sends it the set-up request and waits for
// its first report, or kills it when ctx ends first.
func launch(ctx context.Context, req setupRequest, root *os.File, stdout, stderr *os.File) (*Process, error) {
	if len(req.Config.Resolved) > 0 && req.Config.LinkTargets == nil {
		return nil, fmt.Errorf("%w: the Config has paths to hide and no LinkTargets (see Config.WithDefaults)", ErrConfig)
	}
	if err := checkNotRoot(root); err != nil {
		return nil, err
	}
	if err := checkEtcLinkDirs(EtcLinkDirs, root); err != nil {
		return nil, err
	}
	// Where the links of EtcLinkDirs lead is read here, right after the
	// check, and handed to the helper: Run reads it again, and compares.
	wsPath, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(root.Fd())))
	if err != nil {
		return nil, fmt.Errorf("sandbox: the workspace directory's path: %w", err)
	}
	req.EtcLinked = etcLinked(EtcLinkDirs, wsPath)
	var forgets uint64
	req.LinkTargets, forgets = req.Config.LinkTargets.snapshot()
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox control pipe: %w", err)
	}
	var st [2]int
	if err := unix.Pipe2(st[:], unix.O_CLOEXEC); err != nil {
		ctlR.Close()
		ctlW.Close()
		return nil, fmt.Errorf("sandbox status pipe: %w", err)
	}
	stW := os.NewFile(uintptr(st[1]), "sandbox-status")
	flags := syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS
	if !req.Config.AllowNetwork {
		flags |= syscall.CLONE_NEWNET
	}
	// No parent-death signal: the kernel sends it when the thread that
	// forked the helper ends, not the host process, and any goroutine
	// that locks its thread and returns ends one. The helper watches the
	// control pipe instead, whose only writer is this process: its end
	// means the host let the sandbox go or died.
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{helperArg0},
		Env:        append([]string{helperEnv, helperTraceback}, helperEnvExtra...),
		Stdout:     stdout,
		Stderr:     stderr,
		ExtraFiles: []*os.File{ctlR, root, stW},
		SysProcAttr: &syscall.SysProcAttr{
			Setsid:      true,
			Cloneflags:  uintptr(flags),
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
		},
	}
	err = cmd.Start()
	ctlR.Close()
	stW.Close()
	if err != nil {
		ctlW.Close()
		unix.Close(st[0])
		return nil, startError(err, flags)
	}
	p := &Process{Cmd: cmd, ctl: ctlW, status: st[0], targets: req.Config.LinkTargets, forgets: forgets,
		etc: req.EtcLinked, wsPath: wsPath}
	if hookLaunched != nil {
		hookLaunched(cmd.Process.Pid)
	}
	killed := p.killOnDone(ctx)
	fail := func(err error) (*Process, error) {
		err = givenUp(ctx, killed, err)
		p.Release()
		return nil, err
	}
	if req.Config.AllowNetwork {
		req.Keep = KeptWithNetwork
	}
	req.Hidden, req.ReadableDirs = DefaultHidden, ReadableDirs
	line, err := json.Marshal(req)
	if err != nil {
		return fail(err)
	}
	if _, err := ctlW.Write(append(line, '\n')); err != nil {
		return fail(fmt.Errorf("sandbox: send the set-up request: %w", err))
	}
	// The first report says the sandbox is ready, or why it is not
	// (blocking reads: nothing else is waited for meanwhile).
	first, err := p.readLine()
	if killed() {
		return fail(err)
	}
	if err != nil {
		return fail(fmt.Errorf("sandbox helper exited before it was set up (%v)", err))
	}
	var r report
	if err := json.Unmarshal(first, &r); err != nil {
		return fail(fmt.Errorf("sandbox helper: bad report %q", first))
	}
	if r.Phase != "ready" {
		err := fmt.Errorf("sandbox set-up failed: %s", r.Error)
		switch {
		case r.Unsupported:
			err = unsupportedError(err)
		case r.Config:
			err = markedError{err, ErrConfig}
		case r.HiddenMoved:
			err = markedError{err, ErrHiddenMoved}
		case r.Linked:
			err = markedError{err, ErrHiddenLinked}
		case r.TooMany:
			err = markedError{err, ErrTooManyHidden}
		case r.Resources:
			err = markedError{err, ErrResources}
		}
		return fail(r.carried(err))
	}
	// Where links led the paths to hide stays hidden from every later
	// sandbox, whatever the command does to the links.
	if len(r.LinkTargets) > 0 && req.Config.LinkTargets != nil {
		req.Config.LinkTargets.add(r.LinkTargets)
	}
	if err := unix.SetNonblock(p.status, true); err != nil {
		return fail(fmt.Errorf("sandbox status pipe: %w", err))
	}
	p.prot = r.Protections
	if p.prot != nil {
		p.prot.LinkTargets = req.Config.LinkTargets.Paths()
	}
	return p, nil
}

// checkNotRoot refuses, with an error wrapping [ErrConfig], a workspace
// (the directory root) that is the file system's root, by whatever name
// it was opened: a sandbox around "/" hides nothing around its
// workspace and lets commands write wherever the host may.
func checkNotRoot(root *os.File) error {
	ws, err := root.Stat()
	if err != nil {
		return fmt.Errorf("sandbox: the workspace directory: %w", err)
	}
	top, err := os.Stat("/")
	if err != nil {
		return fmt.Errorf("sandbox: /: %w", err)
	}
	if os.SameFile(ws, top) {
		return markedError{errors.New(`sandbox: the workspace is "/": a sandbox around it would hide nothing ` +
			"and let commands write wherever this process may; give commands a directory of their own"), ErrConfig}
	}
	return nil
}

// checkEtcLinkDirs refuses, with an error wrapping [ErrConfig] that
// names it, a directory of dirs ([EtcLinkDirs]) in which someone the host
// does not trust could plant a link, whose target the sandbox would
// then let commands read, or could do so between this check and the
// reading of its links right after: one that is not absolute; one that
// its group or others may write, or that a user other than a trusted
// one (root: see trustedOwner) owns, this process's own included
// (commands of any workspace of that user write as it); one reached, on
// the way from "/" and through the links on it, through a directory
// that a user not trusted owns, or that its group or others may write,
// unless it is sticky and what is reached in it belongs to a trusted
// user (as in /tmp: no one else may rename it); one reached through a
// link of /proc (the kernel follows it to what it stands for, not to
// the path it reads as); one missing from a directory that its group
// or others may write (anyone could make it); or one in the workspace
// (the directory root), or reached through it, where commands write. A
// directory that is missing otherwise is left out, as the set-up
// leaves it out.
func checkEtcLinkDirs(dirs []string, root *os.File) error {
	refuse := func(d, why string) error {
		return markedError{fmt.Errorf("sandbox: EtcLinkDirs: %s is %s: links there would make where they "+
			"lead readable to commands; list only directories that root owns and no one else can write, "+
			"on a path that no one else can change", d, why), ErrConfig}
	}
	var ws os.FileInfo
	for _, d := range dirs {
		if !filepath.IsAbs(d) {
			return refuse(d, "not absolute")
		}
		if ws == nil {
			var err error
			if ws, err = root.Stat(); err != nil {
				return fmt.Errorf("sandbox: the workspace directory: %w", err)
			}
		}
		why, err := etcLinkDirRisk(d, ws)
		if errors.Is(err, fs.ErrPermission) {
			// Not left out: the helper may see what the host cannot
			// (its user namespace can give it the host's files), and
			// would then follow links no check has vetted.
			return markedError{fmt.Errorf("sandbox: EtcLinkDirs: %s cannot be checked: %w; make it, and each directory "+
				"on the way to it, searchable by this process (uid %d), or leave it out of sandbox.EtcLinkDirs",
				d, err, os.Geteuid()), ErrConfig}
		}
		if err != nil {
			return markedError{fmt.Errorf("sandbox: EtcLinkDirs: %s: %w", d, err), ErrConfig}
		}
		if why != "" {
			return refuse(d, why)
		}
	}
	return nil
}

// etcLinkDirRisk resolves path (absolute) from "/", one name at a time,
// following links, and returns why someone not trusted, or commands,
// could plant a link in the directory it names, or change which one it
// names ("" when none could, or when it is missing from a directory that
// only trusted users may write: it is then left out).
func etcLinkDirRisk(path string, ws os.FileInfo) (string, error) {
	// The walk stops at the first risk (why), or at a name missing.
	var why string
	stop := errors.New("stop")
	dir, err := walkLinks(path, func(dir, next string) (os.FileInfo, error) {
		fi, err := os.Lstat(dir)
		if err != nil {
			return nil, err
		}
		if why = onTheWay(dir, fi, ws); why != "" {
			return nil, stop
		}
		shared := fi.Mode().Perm()&0o022 != 0 // then sticky: onTheWay refused it otherwise
		entry, err := os.Lstat(next)
		switch {
		case errors.Is(err, fs.ErrNotExist) && shared:
			why = fmt.Sprintf("missing from %s, where its group or others may make it", dir)
			return nil, stop
		case errors.Is(err, fs.ErrNotExist):
			return nil, stop
		case err == nil && shared && !trustedOwner(entry):
			why = fmt.Sprintf("reached through %s, owned by uid %d in %s, which its group or others may write",
				next, ownerOf(entry), dir)
			return nil, stop
		case err == nil && entry.Mode()&fs.ModeSymlink != 0 && onProcfs(dir):
			// The walk reads the link as a path; the kernel follows it
			// to what it stands for (another mount namespace's root,
			// say), which this check never saw.
			why = fmt.Sprintf("reached through %s, a link of /proc, which leads to what it stands for in the "+
				"process that follows it, not to the path it reads as", next)
			return nil, stop
		}
		return entry, err
	})
	switch {
	case err == stop:
		return why, nil // "" when left out
	case err != nil:
		return "", err
	}
	// The directory itself: no one else may add a link to it, sticky or
	// not.
	fi, err := os.Lstat(dir)
	switch {
	case err != nil:
		return "", err
	case !fi.IsDir():
		return "not a directory", nil
	case os.SameFile(fi, ws):
		return fmt.Sprintf("in the workspace (%s), where commands write", dir), nil
	case !trustedOwner(fi):
		return "owned by " + untrustedOwner(fi), nil
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Sprintf("writable by its group or others (mode %#o)", fi.Mode().Perm()), nil
	}
	return "", nil
}

// onTheWay says why dir (fi, from Lstat), a directory on the way to one
// of EtcLinkDirs or that one, lets someone not trusted, or commands,
// change what is reached through it: it is the workspace ws, a user not
// trusted owns it, or its group or others may write it and it is not
// sticky. "" when none of these.
func onTheWay(dir string, fi, ws os.FileInfo) string {
	switch {
	case os.SameFile(fi, ws):
		return fmt.Sprintf("in the workspace (%s), where commands write", dir)
	case !trustedOwner(fi):
		return fmt.Sprintf("reached through %s, owned by %s", dir, untrustedOwner(fi))
	case fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0:
		return fmt.Sprintf("reached through %s, which its group or others may write (mode %#o)", dir, fi.Mode().Perm())
	}
	return ""
}

// ownerOf is the uid that owns the file of fi.
func ownerOf(fi os.FileInfo) uint32 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Uid
	}
	return 0
}

// trustedOwner reports whether the file of fi belongs to root, or shows
// the overflow uid because its owner has no uid in this process's user
// namespace (run as root in one, the host's root owns the system's
// directories, which then show it). This process's own user is not
// trusted, unless it is root: sandboxed commands write as that user, in
// their workspace, and any directory of the user's may be a workspace
// of another program's, or of this one's at another time (each sandbox
// refuses only its own). The overflow uid counts only when it is not
// mapped: outside a user namespace, or in one that maps it, it is a
// user of its own (nobody, which daemons run as). Unmapped, it stands
// for any user outside the namespace, root or not: the check cannot
// tell them apart.
func trustedOwner(fi os.FileInfo) bool {
	uid := ownerOf(fi)
	return uid == 0 || uid == overflowUID() && !overflowMapped()
}

// untrustedOwner says who owns the file of fi, which trustedOwner
// refused, and why that user is not trusted.
func untrustedOwner(fi os.FileInfo) string {
	uid := ownerOf(fi)
	if int(uid) == os.Geteuid() {
		return fmt.Sprintf("uid %d, this process's user but not root: commands write as this user, in its "+
			"workspaces, and any of its directories may be another workspace's", uid)
	}
	return fmt.Sprintf("uid %d, not root", uid)
}

// overflowUID is the uid that files show in a user namespace when their
// owner has none there (65534 unless the system says otherwise).
var overflowUID = sync.OnceValue(func() uint32 {
	b, err := os.ReadFile("/proc/sys/kernel/overflowuid")
	if err != nil {
		return 65534
	}
	n, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 32)
	if err != nil {
		return 65534
	}
	return uint32(n)
})

// overflowMapped reports whether this process's user namespace maps the
// overflow uid (/proc/self/uid_map), as the initial one maps every uid:
// a file that shows it then belongs to that user. When the map cannot be
// read, it is taken as mapped.
var overflowMapped = sync.OnceValue(func() bool {
	b, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return true
	}
	o := uint64(overflowUID())
	for line := range strings.Lines(string(b)) {
		var inside, outside, n uint64
		if _, err := fmt.Sscan(line, &inside, &outside, &n); err != nil {
			return true
		}
		if o >= inside && o-inside < n {
			return true
		}
	}
	return false
})

// namespaceQuotas are the files that hold the user's quota of each kind
// of namespace the helper is started in.
var namespaceQuotas = []struct {
	flag int
	file string
}{
	{syscall.CLONE_NEWUSER, "/proc/sys/user/max_user_namespaces"},
	{syscall.CLONE_NEWPID, "/proc/sys/user/max_pid_namespaces"},
	{syscall.CLONE_NEWNS, "/proc/sys/user/max_mnt_namespaces"},
	{syscall.CLONE_NEWIPC, "/proc/sys/user/max_ipc_namespaces"},
	{syscall.CLONE_NEWUTS, "/proc/sys/user/max_uts_namespaces"},
	{syscall.CLONE_NEWNET, "/proc/sys/user/max_net_namespaces"},
}

// startError is the error of a helper that could not be started in new
// namespaces (flags). Whether the system supports them is decided by
// fixed settings, not by how the start failed: the kernel fails with
// ENOSPC both when a quota of namespaces is used up, which any process
// of the user can bring about, and when it is 0, which is how an
// administrator turns that kind of namespace off. Only the second is
// ErrUnsupported; a resource running out is ErrResources, so that it
// can never make commands run unsandboxed.
func startError(err error, flags int) error {
	err = fmt.Errorf("sandbox: start the helper with new namespaces: %w", err)
	if errors.Is(err, unix.ENOSPC) {
		for _, q := range namespaceQuotas {
			if b, rerr := os.ReadFile(q.file); flags&q.flag != 0 && rerr == nil && string(bytes.TrimSpace(b)) == "0" {
				return markedError{fmt.Errorf("%w (%s is 0)", err, q.file), ErrUnsupported}
			}
		}
	}
	return unsupportedError(err)
}

// carried is err, the host's error for the helper's "error" report r,
// with what r carries besides its text: the errno (errors.As finds a
// syscall.Errno) and the text in the workspace's terms
// ([InWorkspaceTerms]).
func (r report) carried(err error) error {
	if r.Errno != 0 {
		err = markedError{err, syscall.Errno(r.Errno)}
	}
	if r.InWorkspace != "" {
		err = workspaceTermsError{err, r.InWorkspace}
	}
	return err
}

// readLine reads the report pipe (blocking) until it holds a whole line,
// and returns that line; what follows it stays in p.buf.
func (p *Process) readLine() ([]byte, error) {
	for {
		if i := bytes.IndexByte(p.buf, '\n'); i >= 0 {
			line := bytes.Clone(p.buf[:i])
			p.buf = append(p.buf[:0], p.buf[i+1:]...)
			return line, nil
		}
		var tmp [512]byte
		n, err := unix.Read(p.status, tmp[:])
		switch {
		case err == unix.EINTR:
		case err != nil:
			return nil, err
		case n == 0:
			return nil, io.EOF
		default:
			p.buf = append(p.buf, tmp[:n]...)
		}
	}
}
