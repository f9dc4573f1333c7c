//go:build linux

package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// The helper is the host binary itself, started again with argv[0] set
// to helperArg0 and helperEnv set; its init hook below takes over before
// main runs. Descriptors: 0 is /dev/null, 1 and 2 the output pipes, and:
const (
	helperArg0 = "polyweave-sandbox"
	helperEnv  = "POLYWEAVE_SANDBOX_HELPER=1"

	fdControl = 3 // read end: the set-up line, the run line, then control bytes; EOF = host gone
	fdRoot    = 4 // the workspace directory, as the file tools opened it
	fdStatus  = 5 // write end: JSON report lines
)

// Control bytes the host writes after the request.
const (
	ctlTerminate = 'T' // SIGTERM to every process of the command
)

// setupRequest is the first line the host sends a helper: how to build
// the sandbox. It is sent when the helper starts, before there is a
// command to run, so that a sandbox can be made ready ahead of its call.
type setupRequest struct {
	Probe  bool   `json:"probe,omitempty"` // set up, report, and exit without running anything
	Config Config `json:"config"`
	// Keep is [KeptWithNetwork] as the host has it, when the network is
	// allowed.
	Keep []string `json:"keep,omitempty"`
	// LinkTargets are the places of Config.LinkTargets as the set-up
	// starts, hidden with the rest.
	LinkTargets []string `json:"linkTargets,omitempty"`
	// EtcLinked is where the links of [EtcLinkDirs] led as the host
	// checked them (see etcLinked), just before it sent the request: it
	// looks again as the command is handed over, and a change makes the
	// sandbox stale ([ErrPreparedStale]). Hidden and ReadableDirs are
	// [DefaultHidden] and [ReadableDirs] as the host has them: the
	// program may have changed them, and this process reads no variable
	// of the program's.
	EtcLinked    []string `json:"etcLinked,omitempty"`
	Hidden       []string `json:"hidden,omitempty"`
	ReadableDirs []string `json:"readableDirs,omitempty"`
	// system is the system's places as the sandbox was set up
	// (ReadableDirs and where their links and those of EtcLinkDirs led:
	// see systemPlaces), for checkCovered to plan as the set-up did: by
	// then they may be hidden, or out of its reach.
	system []string
}

// runRequest is the second line: the one command the sandbox runs.
type runRequest struct {
	Shell   string   `json:"shell"`
	Command string   `json:"command"`
	Env     []string `json:"env"`
	// LinkTargets are the places of Config.LinkTargets as the command
	// is handed over: later set-ups may have added some since this one.
	LinkTargets []string `json:"linkTargets,omitempty"`
}

// report is one line the helper writes on fdStatus: once the sandbox is
// set up ("ready", with the protections), then "exit" with the shell's
// status, or "error" when setting up or starting the command failed.
type report struct {
	Phase       string       `json:"phase"`
	Protections *Protections `json:"protections,omitempty"`
	Exit        *Exit        `json:"exit,omitempty"`
	Error       string       `json:"error,omitempty"`
	// Unsupported: the set-up failed for want of a kernel feature;
	// Config: for a configuration it cannot honour.
	Unsupported bool `json:"unsupported,omitempty"`
	Config      bool `json:"config,omitempty"`
	// HiddenMoved: for ErrHiddenMoved; TooMany: for ErrTooManyHidden;
	// Stale: the prepared sandbox refused its command
	// (ErrPreparedStale).
	// Linked: for ErrHiddenLinked.
	HiddenMoved bool `json:"hiddenMoved,omitempty"`
	Linked      bool `json:"linked,omitempty"`
	TooMany     bool `json:"tooMany,omitempty"`
	Stale       bool `json:"stale,omitempty"`
	// Resources: for want of a resource (see ErrResources).
	Resources bool `json:"resources,omitempty"`
	// StartFailed: the command's shell could not be started
	// (ErrStartFailed).
	StartFailed bool `json:"startFailed,omitempty"`
	// LinkTargets ("ready"): the places in the workspace that links
	// led paths to hide to, which the set-up hid (see [LinkTargets]).
	LinkTargets []string `json:"linkTargets,omitempty"`
	// Errno ("error"): the errno the error wraps, if any; InWorkspace:
	// what it says in the workspace's terms, if it has such a text (see
	// [InWorkspaceTerms]). The host's error carries both (see carried).
	Errno       int    `json:"errno,omitempty"`
	InWorkspace string `json:"inWorkspace,omitempty"`
}

// failure is the "error" report of err: its text, and what the host's
// error is to carry besides (see carried).
func failure(err error) report {
	r := report{Phase: "error", Error: err.Error()}
	var errno unix.Errno
	if errors.As(err, &errno) {
		r.Errno = int(errno)
	}
	var wt workspaceTermsError
	if errors.As(err, &wt) {
		r.InWorkspace = wt.text
	}
	return r
}

func init() {
	if len(os.Args) != 1 || os.Args[0] != helperArg0 || os.Getenv(helperEnv[:strings.IndexByte(helperEnv, '=')]) != "1" {
		return
	}
	// Package initialisation runs on the main thread, locked to the main
	// goroutine; keep it locked: the restrictions below are applied to
	// this thread, and the command is forked from it.
	runtime.LockOSThread()
	os.Exit(helperMain())
}

// helperMain is PID 1 of the sandbox's namespaces. It sets the sandbox
// up, waits for its command, starts it, reaps every process until the
// command's shell exits, kills what is left and reports.
func helperMain() int {
	// Signals from the command must not stop PID 1 early (the kernel
	// only delivers to a namespace's init the signals it handles). They
	// are caught and dropped rather than ignored: an ignored signal would
	// stay ignored in the command after exec. The synchronous ones
	// (SIGSEGV, SIGABRT, …) are among them: sent by kill, they are
	// ordinary signals that Notify catches, and left to the runtime they
	// would crash this process and, with it, the command.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGUSR1,
		syscall.SIGUSR2, syscall.SIGPIPE, syscall.SIGALRM, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU,
		syscall.SIGXCPU, syscall.SIGXFSZ, syscall.SIGVTALRM, syscall.SIGWINCH,
		syscall.SIGSEGV, syscall.SIGBUS, syscall.SIGFPE, syscall.SIGILL, syscall.SIGTRAP, syscall.SIGABRT,
		syscall.SIGSYS, syscall.SIGSTKFLT)
	go func() {
		for range sigs {
		}
	}()
	// Nothing the host left open reaches the command.
	_ = unix.CloseRange(fdStatus+1, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	for _, fd := range []int{fdControl, fdRoot, fdStatus} {
		unix.CloseOnExec(fd)
	}
	status := &reporter{fd: fdStatus}
	ctl := &fdReader{fd: fdControl}
	line, err := ctl.readLine()
	if err != nil {
		status.send(report{Phase: "error", Error: "read the set-up request: " + err.Error()})
		return 2
	}
	var setup setupRequest
	if err := json.Unmarshal(line, &setup); err != nil {
		status.send(report{Phase: "error", Error: "decode the set-up request: " + err.Error()})
		return 2
	}
	cov := covers{mounts: map[uint64]bool{}, files: map[string]int{}}
	prot, wsPath, targets, err := setUp(&setup, cov)
	if err != nil {
		r := failure(err)
		r.Protections = prot
		r.Unsupported, r.Config = errors.Is(err, ErrUnsupported), errors.Is(err, ErrConfig)
		r.HiddenMoved, r.Resources = errors.Is(err, ErrHiddenMoved), errors.Is(err, ErrResources)
		r.TooMany, r.Linked = errors.Is(err, ErrTooManyHidden), errors.Is(err, ErrHiddenLinked)
		status.send(r)
		return 2
	}
	if setup.Probe {
		status.send(report{Phase: "ready", Protections: prot, LinkTargets: targets})
		return 0
	}
	// The command's rlimits are known now: setting them up here keeps
	// that work off the call's path.
	fork, err := commandForker(&setup.Config.Limits)
	if err != nil {
		r := failure(fmt.Errorf("resource limits: %w", err))
		r.Protections = prot
		status.send(r)
		return 2
	}
	// The first decoding of a type builds encoding/json's cache for it,
	// tens of µs better spent now than on the call's path.
	_ = json.Unmarshal([]byte(`{"shell":"","command":"","env":[""]}`), new(runRequest))
	status.send(report{Phase: "ready", Protections: prot, LinkTargets: targets})
	// Ready: wait for the command. EOF means the host let this sandbox
	// go unused (or died).
	line, err = ctl.readLine()
	if err != nil {
		return 0
	}
	var req runRequest
	if err := json.Unmarshal(line, &req); err != nil {
		status.send(report{Phase: "error", Error: "decode the run request: " + err.Error()})
		return 2
	}

	// What appeared, or was replaced, since the set-up is not hidden
	// here: the command must not run. Looked for from inside, where
	// this process lists what the command could make readable.
	if err := checkCovered(&setup, req.LinkTargets, wsPath, cov); err != nil {
		r := failure(err)
		r.Stale, r.Linked = true, errors.Is(err, ErrHiddenLinked)
		status.send(r)
		return 2
	}
	status.send(report{Phase: "checked"})
	pid, err := fork(&req)
	if err != nil {
		r := failure(fmt.Errorf("start the command: %w", err))
		r.StartFailed = true
		status.send(r)
		return 2
	}
	// Stop the whole namespace when the host says so or goes away. The
	// goroutine starts once the shell is on its way, so that waking a
	// thread for it does not delay the shell; a control byte sent
	// meanwhile waits in the pipe.
	go func() {
		for {
			b, err := ctl.readByte()
			if err != nil {
				_ = unix.Kill(-1, unix.SIGKILL)
				os.Exit(3)
			}
			if b == ctlTerminate {
				_ = unix.Kill(-1, unix.SIGTERM)
			}
		}
	}()
	// The rest is done on a goroutine of its own, which no thread is
	// locked to. This one is (package initialisation keeps it locked
	// whatever it does): after a long wait the runtime preempts it, and
	// a locked goroutine is preempted by handing it between threads,
	// two wake-ups that would delay the report. Everything in the
	// sandbox is forked by now, and nothing below depends on the thread.
	done := make(chan int)
	go func() { done <- reapAndReport(pid, status) }()
	return <-done
}

// reapAndReport reaps every process of the sandbox until the shell
// exits, kills and reaps the rest, and reports the shell's status.
func reapAndReport(pid int, status *reporter) int {
	exit := reapUntil(pid)
	killRest()
	// Everything in the sandbox is dead and its output is in the pipes.
	// The report, and the end of the report pipe right after it, tell
	// the host so now rather than when this process has exited, which
	// takes a while longer (the kernel unmaps the runtime's memory and
	// tears the namespaces down). The end is the one event the host
	// wakes up for: it polls the report pipe for its end only, and the
	// output pipes, which this process holds until it exits, do not end
	// before it.
	status.send(report{Phase: "exit", Exit: &exit})
	_ = unix.Close(fdStatus)
	return 0
}

// killRest kills and reaps every process of the sandbox once the shell
// is gone: nothing it started outlives it. Every other process of the
// namespace descends from this one (orphans are re-parented to it, or
// to a subreaper that does), so when this one has no child left there
// is nothing to kill, and kill(-1), which walks every process of the
// host, is spared.
func killRest() {
	for {
		got, err := unix.Wait4(-1, nil, unix.WALL|unix.WNOHANG, nil)
		switch {
		case err == unix.ECHILD:
			return
		case err == unix.EINTR, err == nil && got > 0:
			continue // reaped one that had exited: look again
		}
		// Some are alive (or the look failed).
		_ = unix.Kill(-1, unix.SIGKILL)
		for {
			if _, err := unix.Wait4(-1, nil, unix.WALL, nil); err == unix.ECHILD {
				return
			}
		}
	}
}

// reapUntil reaps children (orphans are re-parented to PID 1) until pid
// exits, and returns its status.
func reapUntil(pid int) Exit {
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, unix.WALL, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return Exit{Code: -1}
		}
		if got != pid || !(ws.Exited() || ws.Signaled()) {
			continue
		}
		if ws.Signaled() {
			return Exit{Code: -1, Signal: int(ws.Signal())}
		}
		return Exit{Code: ws.ExitStatus()}
	}
}

// setUp builds the sandbox req asks for around this process: mounts,
// /proc, pid_max, host name, Landlock and the capability bounding set,
// and returns the workspace's path and the places in it that links led
// paths to hide to (see [LinkTargets]). Landlock, no_new_privs and the
// bounding set are per-thread here and reach the command because it is
// forked from this (locked) thread. It keeps req.Keep visible (see
// [KeptWithNetwork]), and adds the covers it mounts to cov.
func setUp(req *setupRequest, cov covers) (*Protections, string, []string, error) {
	cfg, keep := &req.Config, req.Keep
	p := &Protections{Sandbox: true, DiesWithHost: true, ClosedFDs: true}
	p.Namespaces = []string{"user", "pid", "mount"}
	if !cfg.AllowNetwork {
		p.Namespaces = append(p.Namespaces, "network")
		p.NoNetwork = true
	}
	p.Namespaces = append(p.Namespaces, "ipc", "uts")

	// The workspace is found by its descriptor, not by its path: the
	// names on the way to it may be changed meanwhile by commands of
	// another sandbox (of a workspace that holds this one), and a path
	// would then lead elsewhere ("/", say).
	wsPath, wsFD, err := workspaceDir()
	if err != nil {
		return p, "", nil, err
	}
	defer unix.Close(wsFD)
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return p, "", nil, unsupported("make mounts private", err)
	}
	// A detached copy of the workspace, taken while it is still writable.
	tree, err := unix.OpenTree(wsFD, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_EMPTY_PATH)
	if err != nil {
		return p, "", nil, stepFailed("clone the workspace mount", err)
	}
	defer unix.Close(tree)
	if err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE,
		&unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID}); err != nil {
		p.Missing = append(p.Missing, "read-only root: "+err.Error())
	} else {
		p.ReadOnlyRoot = true
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		// The kernel refuses a new procfs in a user namespace whenever
		// the visible /proc has anything mounted over part of it, as
		// container runtimes mask /proc/kcore, /proc/keys, /proc/sys:
		// the system's policy, which no later step can work around, so
		// the system cannot sandbox (as when the namespaces cannot be
		// created), not a set-up that failed.
		return p, "", nil, unsupported("mount a fresh /proc (refused where the host's /proc has parts "+
			"masked, as in most containers)", err)
	}
	p.FreshProc = true
	l := cfg.Limits
	p.Limits = &l
	if err := os.WriteFile("/proc/sys/kernel/pid_max", []byte(strconv.Itoa(l.MaxProcesses+1)), 0); err != nil {
		p.Missing = append(p.Missing, "process limit by pid_max (Linux 6.14 or later): "+err.Error())
	} else {
		p.ProcessesByPidMax = true
	}
	if err := unix.Mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV,
		tmpOptions(cfg.TmpSize)); err != nil {
		return p, "", nil, stepFailed("mount a private /tmp", err)
	}
	p.PrivateTmp = true
	ptys, err := freshDev(tmpOptions(cfg.TmpSize))
	if err != nil {
		return p, "", nil, stepFailed("mount a /dev of the sandbox's own", err)
	}
	p.FreshDev = true
	if !ptys {
		p.Missing = append(p.Missing, "pseudo-terminals: no devpts instance of the sandbox's own could be mounted")
	}
	if len(cfg.Hide) > 0 && cfg.Resolved == nil {
		return p, "", nil, fmt.Errorf("%w: Hide was not resolved (see ResolveHide)", ErrConfig)
	}
	defaults, others := hideList(req.Hidden, wsPath)
	// Where the links of /etc (as the host found them) and of
	// ReadableDirs lead: left alone, with ReadableDirs, where a place
	// kept for a link in the workspace leads (see HiddenPath.LedOut);
	// where those of /etc lead is readable with Landlock.
	etc := req.EtcLinked
	req.system = systemPlaces(req.ReadableDirs, etc)
	plan, err := planHiding(append(slices.Clone(defaults), others...), cfg.Resolved, req.LinkTargets, wsPath, req.system)
	if err != nil {
		return p, "", nil, err
	}
	// Where the files kept visible are, found before the hiding covers
	// the links that lead there.
	readable := keptReadable(keep, wsPath)
	etcFiles, etcDirs := etcLinkTargets(etc, req.ReadableDirs, append(slices.Clone(plan.outside), plan.inside...))
	readable = append(readable, etcFiles...)
	kept, err := keepFiles(keep, others, cfg.Resolved, wsPath, &plan)
	defer func() {
		for _, k := range kept {
			unix.Close(k.tree)
		}
	}()
	if err != nil {
		return p, "", nil, err
	}
	// Only an ancestor of the workspace that was covered is a mount
	// point to make read-only once the workspace's mount point is made
	// in it (one beneath /tmp or /dev, the sandbox's own, is not
	// planned: see sandboxesOwn).
	var covered []string
	for _, h := range plan.outside {
		ancestor := slices.Contains(plan.ancestors, h)
		ok, err := cov.hide(h, ancestor, plan.ids[h], "")
		if err != nil {
			return p, "", nil, fmt.Errorf("hide %s: %w", h, err)
		}
		if ok && ancestor {
			covered = append(covered, h)
		}
	}
	plan.ancestors = covered
	for _, k := range kept {
		if err := mountKept(k); err != nil {
			return p, "", nil, fmt.Errorf("keep %s visible: %w", k.path, err)
		}
	}
	if err := os.MkdirAll(wsPath, 0o755); err != nil && !errors.Is(err, unix.EROFS) {
		return p, "", nil, fmt.Errorf("workspace mount point: %w", err)
	}
	mounted, err := mountWorkspace(tree, wsPath)
	if err != nil {
		return p, "", nil, err
	}
	defer unix.Close(mounted)
	// What led nowhere may lead into the workspace now that it is
	// mounted: beneath /tmp, it was not there to be found before (the
	// sandbox's own /tmp covers the host's), unlike the paths inside it
	// that were resolved when it was opened (their identities say where).
	late, err := planHidingLedOut(plan.missing, nil, plan.missingTargets, wsPath, plan.ledOut, req.system)
	if err != nil {
		return p, "", nil, err
	}
	targets := append(plan.targets, late.targets...)
	inside, outside := pathSet{}, pathSet{}
	for _, h := range plan.inside {
		inside.add(h)
	}
	for _, h := range plan.outside {
		outside.add(h)
	}
	for _, h := range late.inside {
		if !inside.holds(h) {
			inside.add(h)
			plan.inside = append(plan.inside, h)
		}
	}
	for _, h := range late.outside {
		// An ancestor of the workspace found only now was made for its
		// mount point in the sandbox's own /tmp: nothing of the host's.
		if within(wsPath, h) || outside.holds(h) {
			continue
		}
		if _, err := cov.hide(h, false, HiddenPath{}, ""); err != nil {
			return p, "", nil, fmt.Errorf("hide %s: %w", h, err)
		}
		outside.add(h)
		plan.outside = append(plan.outside, h)
	}
	if n := len(plan.inside) + len(plan.outside); n > MaxHidden {
		// The patterns were matched again: their latest counts.
		maps.Copy(plan.matched, late.matched)
		return p, "", nil, tooManyHidden(n, plan.matched, req.LinkTargets, wsPath)
	}
	if err := pinWays(plan.inside, wsPath); err != nil {
		return p, "", nil, err
	}
	for _, h := range plan.inside {
		if _, err := cov.hide(h, false, plan.ids[h], wsPath); err != nil {
			return p, "", nil, fmt.Errorf("hide %s: %w", h, err)
		}
	}
	// The directories that hide the workspace's surroundings were left
	// writable to make its mount point; nothing else is made in them.
	for _, h := range plan.ancestors {
		if err := unix.Mount("", h, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return p, "", nil, fmt.Errorf("hide %s: make it read-only: %w", h, err)
		}
	}
	p.Hidden = append(append(p.Hidden, plan.outside...), plan.inside...)
	if err := unix.Fchdir(mounted); err != nil {
		return p, "", nil, fmt.Errorf("enter the workspace: %w", err)
	}
	_ = unix.Sethostname([]byte("sandbox"))

	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return p, "", nil, stepFailed("no_new_privs", err)
	}
	abi, err := 0, error(nil)
	if !cfg.WithoutLandlock {
		abi, err = restrictLandlock(mounted, !cfg.AllowNetwork, req.ReadableDirs, readable, etcDirs)
	}
	switch {
	case cfg.WithoutLandlock:
		p.Missing = append(p.Missing, "landlock: turned off by the configuration"+landlockMissing)
	case err != nil:
		// The namespaces, the read-only mounts and the covers confine
		// the command without it, as on a kernel without Landlock.
		p.Missing = append(p.Missing, "landlock: "+err.Error()+landlockMissing)
	case abi == 0:
		p.Missing = append(p.Missing, "landlock: not supported by this kernel"+landlockMissing)
	default:
		p.Landlock = abi
		p.LandlockNetwork = !cfg.AllowNetwork && abi >= 4
		p.AlsoReadable = slices.Concat(readable, etcDirs)
	}
	if cfg.AllowNetwork && p.Landlock < 6 {
		// The sandbox shares the host's network namespace, and with it
		// the names of abstract sockets; only Landlock's scoping keeps
		// commands from them.
		p.Missing = append(p.Missing, "abstract Unix sockets of the host: reachable with the network allowed "+
			"(Landlock ABI 6, Linux 6.12, confines them)")
	}
	if err := dropBoundingSet(); err != nil {
		return p, "", nil, stepFailed("drop capabilities", err)
	}
	p.NoCapabilities = true
	// The session keyring is inherited from the host, and keyrings are
	// not namespaced: the command gets a new, empty one (and the filter
	// below refuses the key system calls besides).
	// A keyctl refused (EPERM, as a container runtime's seccomp profile
	// does) leaves the host's keyring joined, but the same refusal, which
	// the command inherits, keeps it from the keys; so does the filter
	// below when it is in force.
	if _, _, errno := unix.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0); errno != 0 && errno != unix.ENOSYS {
		p.Missing = append(p.Missing, "a new session keyring: "+errno.Error()+
			" (the host's session keyring stays joined; the key system calls are refused to commands by the seccomp filter)")
	}
	if err := installSeccomp(cfg.AllowNetwork); err != nil {
		p.Missing = append(p.Missing, "seccomp filter: "+err.Error())
	} else {
		p.Seccomp = true
	}
	return p, wsPath, targets, nil
}

// unsupported is the error of the first mount in the new namespaces
// and of the fresh /proc, the steps besides creating them that say
// whether the system can sandbox: the namespaces exist, and the kernel
// (or a security module, as AppArmor's restriction of unprivileged user
// namespaces does) does not let their root mount anything, or not a
// procfs (the host's /proc has masked parts, as in most containers), so
// the sandbox cannot be set up.
func unsupported(step string, err error) error {
	return unsupportedError(fmt.Errorf("%s: %w", step, err))
}

// stepFailed is the error of a step of the set-up that is needed for
// the sandbox's promises and fails once the namespaces are usable (the
// first mount and the fresh /proc worked): never [ErrUnsupported], for a system that
// creates the namespaces and lets one hardening step fail (a container
// runtime's seccomp profile, a security module) would otherwise run
// commands with no sandbox at all. It is [ErrResources] when a resource
// ran out. The steps that the sandbox can do without are reported in
// [Protections].Missing instead: the read-only root, pid_max, Landlock,
// the new session keyring, the seccomp filter, pseudo-terminals.
func stepFailed(step string, err error) error {
	err = fmt.Errorf("%s: %w (the system creates the sandbox's namespaces but refused this step, "+
		"without which the sandbox does not hold: commands do not run)", step, err)
	if isResourceError(err) {
		return markedError{err, ErrResources}
	}
	return err
}

// workspaceDir returns the path, in this mount namespace, of the
// directory on fdRoot (opened in the host's), and a descriptor (O_PATH)
// of that directory opened in this namespace, checked to be that very
// directory: the host's descriptor cannot be cloned from here.
func workspaceDir() (string, int, error) {
	path, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fdRoot))
	if err != nil {
		return "", -1, fmt.Errorf("workspace directory: %w", err)
	}
	fd, err := openDirNoLinks(path)
	if err == nil {
		err = sameDir(fd, fdRoot)
		if err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		return "", -1, fmt.Errorf("workspace directory %s is no longer at its path (it was moved or replaced "+
			"while its sandbox was set up): refusing to run there: %w", path, err)
	}
	return path, fd, nil
}

// mountWorkspace moves the detached copy of the workspace, tree, onto
// its mount point wsPath and returns a descriptor (O_PATH) of the
// mounted copy's root, opened by its path and checked to be that root:
// the path is how commands will name it.
func mountWorkspace(tree int, wsPath string) (int, error) {
	mp, err := openDirNoLinks(wsPath)
	if err != nil {
		return -1, fmt.Errorf("workspace mount point: %w", err)
	}
	err = unix.MoveMount(tree, "", mp, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
	unix.Close(mp)
	if err != nil {
		return -1, fmt.Errorf("mount the workspace: %w", err)
	}
	fd, err := openDirNoLinks(wsPath)
	if err == nil {
		err = sameDir(fd, fdRoot)
		if err == nil {
			err = sameMount(fd, tree)
		}
		if err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		return -1, fmt.Errorf("the workspace mounted at %s is not there (the path was changed while "+
			"its sandbox was set up): refusing to run there: %w", wsPath, err)
	}
	return fd, nil
}

// openDirNoLinks opens the directory at path (absolute) as O_PATH,
// refusing symbolic links anywhere on the way.
func openDirNoLinks(path string) (int, error) {
	for {
		fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if err != unix.EINTR && err != unix.EAGAIN {
			return fd, err
		}
	}
}

// errNotSame says a path no longer leads where it did.
var errNotSame = errors.New("a different file is there now")

// sameDir checks that the descriptors a and b are of the same directory
// (device and inode).
func sameDir(a, b int) error {
	var sa, sb unix.Stat_t
	if err := unix.Fstat(a, &sa); err != nil {
		return err
	}
	if err := unix.Fstat(b, &sb); err != nil {
		return err
	}
	if sa.Dev != sb.Dev || sa.Ino != sb.Ino {
		return errNotSame
	}
	return nil
}

// sameMount checks that the descriptors a and b are on the same mount.
func sameMount(a, b int) error {
	var sa, sb unix.Statx_t
	if err := unix.Statx(a, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &sa); err != nil {
		return err
	}
	if err := unix.Statx(b, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &sb); err != nil {
		return err
	}
	if sa.Mask&unix.STATX_MNT_ID == 0 || sb.Mask&unix.STATX_MNT_ID == 0 {
		return errors.New("the kernel does not tell mounts apart (statx without STATX_MNT_ID)")
	}
	if sa.Mnt_id != sb.Mnt_id {
		return errNotSame
	}
	return nil
}

// devNodes are the host's devices that the sandbox's /dev holds.
var devNodes = []string{"null", "zero", "full", "random", "urandom"}

// freshDev covers /dev with a tmpfs of the sandbox's own that holds only
// the devices commands need (the host's, bound in), the usual links, a
// devpts instance of its own for pseudo-terminals (none of the host's
// terminals is in it) and, on /dev/shm, an empty writable tmpfs of its
// own (mount options shm) for POSIX shared memory and semaphores; /dev
// itself is then made read-only. There is no /dev/tty: a command has
// no controlling terminal. ptys says whether the devpts instance could
// be mounted.
func freshDev(shm string) (ptys bool, err error) {
	trees := make([]int, 0, len(devNodes))
	names := make([]string, 0, len(devNodes))
	defer func() {
		for _, t := range trees {
			unix.Close(t)
		}
	}()
	for _, name := range devNodes {
		t, err := unix.OpenTree(unix.AT_FDCWD, "/dev/"+name, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err == unix.ENOENT {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("clone /dev/%s: %w", name, err)
		}
		trees = append(trees, t)
		names = append(names, name)
	}
	if err := unix.Mount("tmpfs", "/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=64k,mode=0755"); err != nil {
		return false, err
	}
	for i, name := range names {
		path := "/dev/" + name
		fd, err := unix.Open(path, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o666)
		if err != nil {
			return false, fmt.Errorf("%s: %w", path, err)
		}
		unix.Close(fd)
		if err := unix.MoveMount(trees[i], "", unix.AT_FDCWD, path, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return false, fmt.Errorf("%s: %w", path, err)
		}
	}
	for link, to := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2", "ptmx": "pts/ptmx"} {
		if err := unix.Symlink(to, "/dev/"+link); err != nil {
			return false, fmt.Errorf("/dev/%s: %w", link, err)
		}
	}
	for _, d := range []string{"/dev/pts", "/dev/shm"} {
		if err := unix.Mkdir(d, 0o755); err != nil {
			return false, fmt.Errorf("%s: %w", d, err)
		}
	}
	if err := unix.Mount("tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, shm); err != nil {
		return false, fmt.Errorf("/dev/shm: %w", err)
	}
	ptys = unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC,
		"newinstance,ptmxmode=0666,mode=0620") == nil
	if err := unix.MountSetattr(unix.AT_FDCWD, "/dev", 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return false, fmt.Errorf("make /dev read-only: %w", err)
	}
	return ptys, nil
}

// covers are the mounts, by id, that a set-up made to hide paths: the
// empty tmpfs over a directory, /dev/null over anything else. Run's
// check takes a mount root for a cover only when it is one of them:
// the set-up makes other mounts in the workspace (pinWays' pins, each
// a directory of the workspace, readable), which the host may move to
// a name the sandbox must hide. files holds each file (not directory)
// covered in the workspace open (O_PATH), by its path, so that Run's
// check counts its links as they are then: the cover shows /dev/null
// there.
type covers struct {
	mounts map[uint64]bool
	files  map[string]int
}

// fdBirth is when the file fd refers to (O_PATH will do) was made (see
// [HiddenPath.Birth]): 0 when its file system does not say.
func fdBirth(fd int) int64 {
	var stx unix.Statx_t
	if unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME, &stx) != nil {
		return 0
	}
	return statxBirth(&stx)
}

// hide covers path (resolved) with an empty read-only tmpfs (a
// directory) or /dev/null (anything else), and adds the cover to c. An
// ancestor of the workspace gets a writable tmpfs, to hold the
// workspace's mount point, made read-only once the workspace is
// mounted. The path is opened without following links and covered by
// that descriptor, so that what is covered is what was checked: when
// id has an identity (see [HiddenPath]) and the path no longer has it,
// a path inside the workspace is refused ([ErrHiddenMoved]); outside
// it, what is there now is hidden (a file replaced by a rename, say).
// A path that is gone is left alone, unless it had an identity inside
// the workspace; covered says whether the path was covered. A file
// inside the workspace (wsPath is "" for a path outside it) with more
// than one hard link is refused ([ErrHiddenLinked]).
func (c covers) hide(path string, ancestor bool, id HiddenPath, wsPath string) (covered bool, err error) {
	inside := wsPath != ""
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	identified := id.Dev != 0 || id.Ino != 0
	switch {
	case err == unix.ENOENT && !(inside && identified):
		return false, nil
	case err == unix.ENOENT || err == unix.ELOOP || err == unix.ENOTDIR:
		if inside {
			return false, fmt.Errorf("%w: %s: %v", ErrHiddenMoved, path, err)
		}
		return false, err
	case err != nil:
		return false, err
	}
	keep := false
	defer func() {
		if !keep {
			unix.Close(fd)
		}
	}()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, err
	}
	if inside && identified && (uint64(st.Dev) != id.Dev || st.Ino != id.Ino || id.Birth != fdBirth(fd)) {
		return false, fmt.Errorf("%w: %s holds another file than when the workspace was opened", ErrHiddenMoved, path)
	}
	file := inside && st.Mode&unix.S_IFMT != unix.S_IFDIR
	if file {
		if err := linkedError(path, wsPath, uint64(st.Nlink)); err != nil {
			return false, err
		}
	}
	var cover int
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		cover, err = emptyTmpfs(ancestor)
	} else {
		cover, err = nullFile()
	}
	if err != nil {
		return false, err
	}
	defer unix.Close(cover)
	mnt, err := mountID(cover)
	if err != nil {
		return false, err
	}
	if err := unix.MoveMount(cover, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return false, err
	}
	c.mounts[mnt] = true
	if file {
		if old, ok := c.files[path]; ok {
			unix.Close(old)
		}
		c.files[path], keep = fd, true
	}
	return true, nil
}

// linkedError is the error of a file to hide at path, in the workspace
// wsPath, that has nlink hard links: nil for one (or none, the file
// being removed meanwhile), ErrHiddenLinked for more, with a text in
// the workspace's terms ([InWorkspaceTerms]).
func linkedError(path, wsPath string, nlink uint64) error {
	if nlink <= 1 {
		return nil
	}
	text := func(name string) string {
		return fmt.Sprintf("a file to hide, %s, with %d hard links: a sandbox hides the one name, and commands "+
			"would read the file by its others; no command runs until the host removes the other links "+
			"(find -samefile names them) or puts a copy in their place", name, nlink)
	}
	return workspaceTermsError{fmt.Errorf("%w: %s", ErrHiddenLinked, text(path)), text(relName(path, wsPath))}
}

// emptyTmpfs makes a detached mount of a new, empty tmpfs, read-only
// but for an ancestor of the workspace (see hide), and returns it.
func emptyTmpfs(ancestor bool) (int, error) {
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("tmpfs: %w", err)
	}
	defer unix.Close(fs)
	size, attrs := "4k", unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC
	if ancestor {
		size = "64k"
	} else {
		attrs |= unix.MOUNT_ATTR_RDONLY
	}
	if err := unix.FsconfigSetString(fs, "size", size); err != nil {
		return -1, fmt.Errorf("tmpfs size: %w", err)
	}
	if err := unix.FsconfigSetString(fs, "mode", "0555"); err != nil {
		return -1, fmt.Errorf("tmpfs mode: %w", err)
	}
	if !ancestor {
		if err := unix.FsconfigSetFlag(fs, "ro"); err != nil {
			return -1, fmt.Errorf("tmpfs read-only: %w", err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, fmt.Errorf("tmpfs: %w", err)
	}
	m, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, attrs)
	if err != nil {
		return -1, fmt.Errorf("mount a tmpfs: %w", err)
	}
	return m, nil
}

// nullFile makes a detached, read-only copy of the mount of /dev/null,
// and returns it.
func nullFile() (int, error) {
	null, err := unix.OpenTree(unix.AT_FDCWD, "/dev/null", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return -1, err
	}
	if err := unix.MountSetattr(null, "", unix.AT_EMPTY_PATH,
		&unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NOEXEC}); err != nil {
		unix.Close(null)
		return -1, err
	}
	return null, nil
}

// mountID is the id of the mount the descriptor fd is on.
func mountID(fd int) (uint64, error) {
	var st unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_STATX_DONT_SYNC, unix.STATX_MNT_ID, &st); err != nil {
		return 0, err
	}
	if st.Mask&unix.STATX_MNT_ID == 0 {
		return 0, errors.New("the kernel does not tell mounts apart (statx without STATX_MNT_ID, Linux 5.8)")
	}
	return st.Mnt_id, nil
}

// pinWays makes each directory of the workspace wsPath on the way to
// a path of inside (below the workspace's root) a mount point of its
// own, a recursive bind mount of itself, shallowest first, before
// anything is hidden in it: the kernel refuses to rename or remove a
// mount point (EBUSY), so a command cannot move a hidden path, with
// the cover over it, to a name the next sandbox does not hide. The cost
// is a mount per directory on the way, and that a rename(2) into or out
// of such a directory crosses mounts and fails (EXDEV: mv falls back to
// copying, other programs fail). Directories a pattern's wildcard
// matched are pinned too: one moved deeper would match it no more. A
// directory gone
// by now is skipped: hiding what was beneath it says what that means.
func pinWays(inside []string, wsPath string) error {
	var ways []string
	seen := map[string]bool{}
	for _, h := range inside {
		for d := filepath.Dir(h); d != wsPath && within(d, wsPath) && !seen[d]; d = filepath.Dir(d) {
			seen[d] = true
			ways = append(ways, d)
		}
	}
	slices.SortFunc(ways, func(a, b string) int { return len(a) - len(b) })
	for _, d := range ways {
		fd, err := unix.Openat2(unix.AT_FDCWD, d, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		switch {
		case err == unix.ENOENT || err == unix.ELOOP || err == unix.ENOTDIR:
			continue
		case err != nil:
			return fmt.Errorf("pin %s: %w", d, err)
		}
		err = pin(fd)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("pin %s: %w", d, err)
		}
	}
	return nil
}

// pin mounts a recursive copy of the directory on fd onto itself.
func pin(fd int) error {
	tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_EMPTY_PATH)
	if err != nil {
		return err
	}
	defer unix.Close(tree)
	return unix.MoveMount(tree, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
}

// keptReadable are the files of keep ([KeptWithNetwork]) with their
// links followed in the host's view, outside the workspace wsPath:
// where a command reads them (the name resolver's configuration, say,
// often a link into /run), readable as the directories of
// [ReadableDirs] are. The directories on the way are not listable.
func keptReadable(keep []string, wsPath string) []string {
	var files []string
	for _, name := range keep {
		if path, ok := resolveOutside(nil, name, wsPath); ok && !within(path, wsPath) {
			files = append(files, path)
		}
	}
	return files
}

// etcLinkTargets returns, of etc (where the symbolic links directly in
// the directories of [EtcLinkDirs] lead, followed in the host's view:
// see etcLinked), those outside the directories of readableDirs
// ([ReadableDirs]), as files and directories: what the system's
// configuration names, which commands read through /etc and which
// Landlock would refuse otherwise. A target is left out when it is
// hidden (within a path of hidden, whose covers would be read anyway);
// etcLinked left out "/", what holds the workspace or is in it, and a
// directory just below "/" (a link to /var or /home would open far
// more than the configuration).
func etcLinkTargets(etc, readableDirs []string, hidden []string) (files, dirs []string) {
	for _, path := range etc {
		if slices.ContainsFunc(readableDirs, func(r string) bool { return within(path, r) }) ||
			slices.ContainsFunc(hidden, func(h string) bool { return within(path, h) }) {
			continue
		}
		fi, err := os.Stat(path)
		switch {
		case err != nil:
		case fi.IsDir():
			dirs = append(dirs, path)
		default:
			files = append(files, path)
		}
	}
	return files, dirs
}

// restrictLandlock applies, to this thread, a Landlock domain that allows
// reading and executing beneath readableDirs ([ReadableDirs]) and dirs, the files of kept, the
// workspace (the directory on the descriptor ws), /tmp and /dev/shm,
// writing beneath the last three (and to the null devices and the
// sandbox's own pseudo-terminals), and, when noNet, no TCP. It returns
// the ABI version in force, 0 when the kernel has no Landlock. Reading
// is restricted from ABI 1, so any Landlock confines it.
func restrictLandlock(ws int, noNet bool, readableDirs, kept, dirs []string) (int, error) {
	abi, err := ll.LandlockGetABIVersion()
	if err != nil || abi < 1 {
		return 0, nil
	}
	fd, flags, err := landlockConfig(noNet).BestEffort().NewRulesetFD(
		landlock.RODirs(readableDirs...).IgnoreIfMissing(),
		landlock.RODirs(dirs...).IgnoreIfMissing(),
		landlock.ROFiles(kept...).IgnoreIfMissing(),
		// The workspace by its descriptor (the magic link opens that very
		// directory), not by a path someone else may change meanwhile.
		// /tmp and /dev/shm are the sandbox's own (see freshDev).
		landlock.RWDirs("/proc/self/fd/"+strconv.Itoa(ws), "/tmp", "/dev/shm").WithRefer(),
		landlock.RWFiles("/dev/null", "/dev/zero", "/dev/full").IgnoreIfMissing(),
		// The sandbox's own pseudo-terminals (see freshDev).
		landlock.RWFiles("/dev/pts").WithIoctlDev().IgnoreIfMissing(),
	)
	if err != nil {
		return 0, err
	}
	if fd < 0 {
		return 0, nil
	}
	defer unix.Close(fd)
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		return 0, err
	}
	return min(abi, 9), nil
}

// landlockMissing says, after why Landlock is not in force, what
// commands can do without it.
const landlockMissing = " (writes stay confined by the read-only mounts, but reads are not confined " +
	"to the system's directories: every file outside the hidden paths that the host's user may read is readable)"

// landlockConfig is what a sandbox's Landlock domain restricts, at the
// newest ABI the sandbox knows (the kernel's may be older: the caller
// makes it best effort): every file system access, signals and abstract
// Unix sockets out of the domain, Unix sockets made outside the domain
// reached by their path (ABI 9: no rule grants it, so with the network
// allowed, when commands may make Unix sockets, they reach only those
// made in the sandbox), and, when noNet, TCP bind and connect (UDP,
// which ABI 10 restricts, reaches nothing in a network namespace of
// the sandbox's own).
func landlockConfig(noNet bool) landlock.Config {
	cfg := landlock.Config{HandledAccessFS: landlock.V9.HandledAccessFS, Scoped: landlock.V9.Scoped}
	if noNet {
		cfg.HandledAccessNet = landlock.V4.HandledAccessNet
	}
	return cfg
}

// dropBoundingSet empties this thread's capability bounding set, so the
// command (root in its user namespace) executes with no capabilities.
func dropBoundingSet() error {
	last := 40
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			last = n
		}
	}
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			return err
		}
	}
	return nil
}

// commandForker sets up how the shell is forked with its rlimits in
// force before it runs an instruction, and returns the function that
// forks it. rlimits are per process, and the shell inherits the
// helper's: when the address-space limit leaves the helper's Go runtime
// room to spare (the default does), the helper sets the limits on
// itself, here, ahead of the command (it does little more: it waits,
// kills and reports, and a sandbox runs one command), and the shell is
// simply forked; otherwise the shell is forked stopped by ptrace at its
// exec, given its limits, and let go, which costs a round trip more.
func commandForker(l *Limits) (func(req *runRequest) (int, error), error) {
	cpu := uint64((l.MaxCPUTime + 999_999_999) / 1_000_000_000)
	limits := []struct {
		res  int
		soft uint64
		hard uint64
	}{
		{unix.RLIMIT_AS, uint64(l.MaxAddressSpace), uint64(l.MaxAddressSpace)},
		{unix.RLIMIT_FSIZE, uint64(l.MaxFileSize), uint64(l.MaxFileSize)},
		{unix.RLIMIT_NPROC, uint64(l.MaxProcesses), uint64(l.MaxProcesses)},
		{unix.RLIMIT_CPU, cpu, cpu + 1},
		{unix.RLIMIT_CORE, 0, 0},
		{unix.RLIMIT_NOFILE, uint64(l.MaxOpenFiles), uint64(l.MaxOpenFiles)},
	}
	setLimits := func(pid int) error {
		for _, r := range limits {
			rl := syscall.Rlimit{Cur: r.soft, Max: r.hard}
			var err error
			if pid == 0 {
				// syscall.Setrlimit, which also tells the runtime not to
				// give the processes it forks the RLIMIT_NOFILE this one
				// started with.
				err = syscall.Setrlimit(r.res, &rl)
			} else {
				err = unix.Prlimit(pid, r.res, (*unix.Rlimit)(&rl), nil)
			}
			if err != nil {
				return fmt.Errorf("rlimit %d: %w", r.res, err)
			}
		}
		return nil
	}
	if roomToSpare(uint64(l.MaxAddressSpace)) {
		if err := setLimits(0); err != nil {
			return nil, err
		}
		return func(req *runRequest) (int, error) {
			return forkShell(req, nil)
		}, nil
	}
	return func(req *runRequest) (int, error) {
		pid, err := forkShell(req, &syscall.SysProcAttr{Ptrace: true})
		if err != nil {
			return 0, err
		}
		var ws unix.WaitStatus
		for {
			_, err := unix.Wait4(pid, &ws, unix.WALL, nil)
			if err != unix.EINTR {
				break
			}
		}
		if !ws.Stopped() {
			return 0, fmt.Errorf("the shell did not stop at exec (%v)", ws)
		}
		if err := setLimits(pid); err != nil {
			_ = unix.Kill(pid, unix.SIGKILL)
			return 0, err
		}
		if err := unix.PtraceDetach(pid); err != nil {
			_ = unix.Kill(pid, unix.SIGKILL)
			return 0, fmt.Errorf("release the shell: %w", err)
		}
		return pid, nil
	}, nil
}

// tmpOptions are the mount options of the sandbox's /tmp (and of its
// /dev/shm) of size bytes:
// as many files as it has pages (at least 1024), for each file, even an
// empty one, takes kernel memory that the size does not count.
func tmpOptions(size int64) string {
	inodes := max(size/4096, 1024)
	return "mode=1777,size=" + strconv.FormatInt(size, 10) + ",nr_inodes=" + strconv.FormatInt(inodes, 10)
}

// forkShell forks `shell -c command` from this thread, with descriptors
// 0-2 only, in the workspace.
func forkShell(req *runRequest, sys *syscall.SysProcAttr) (int, error) {
	shell, err := filepath.Abs(req.Shell)
	if err != nil {
		return 0, err
	}
	// No Dir: the shell starts in the helper's working directory, the
	// workspace it entered by descriptor; a path could lead elsewhere.
	attr := &syscall.ProcAttr{Env: req.Env, Files: []uintptr{0, 1, 2}, Sys: sys}
	return syscall.ForkExec(shell, []string{shell, "-c", req.Command}, attr)
}

// roomToSpare reports whether an address-space limit of as bytes leaves
// this process 512 MiB more than it has mapped now.
func roomToSpare(as uint64) bool {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return false
	}
	pages, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return false
	}
	return as >= pages*uint64(os.Getpagesize())+512<<20
}

// reporter writes report lines on a raw descriptor (outside the runtime
// poller: the helper has nothing to multiplex).
type reporter struct{ fd int }

func (r *reporter) send(rep report) {
	b, _ := json.Marshal(rep)
	b = append(b, '\n')
	for len(b) > 0 {
		n, err := unix.Write(r.fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return
		}
		b = b[n:]
	}
}

// fdReader reads the control pipe byte by byte after a buffered line.
type fdReader struct {
	fd  int
	buf []byte
}

func (r *fdReader) readLine() ([]byte, error) {
	var line []byte
	for {
		b, err := r.readByte()
		if err != nil {
			return nil, err
		}
		if b == '\n' {
			return line, nil
		}
		if len(line) > 16<<20 {
			return nil, errors.New("request too long")
		}
		line = append(line, b)
	}
}

func (r *fdReader) readByte() (byte, error) {
	for len(r.buf) == 0 {
		var tmp [4096]byte
		n, err := unix.Read(r.fd, tmp[:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n == 0 {
			return 0, errors.New("EOF")
		}
		r.buf = append(r.buf[:0], tmp[:n]...)
	}
	b := r.buf[0]
	r.buf = r.buf[1:]
	return b, nil
}

// checkCovered looks again, from inside the sandbox and as the set-up
// req asked for does, for what it must hide around the workspace
// wsPath (the places of [LinkTargets] the set-up was given included,
// and targets, those known as the command is handed over), and checks
// that each of those paths is still covered: the root of one of the
// covers the set-up mounted (cov), or gone. A path that appeared since
// the set-up is not; nor is one whose file was removed or replaced
// from outside, which takes the cover with it (the kernel detaches a
// mount whose mount point is removed in another namespace), whatever
// inode the file there has now; nor a directory the set-up pinned
// (see pinWays), a mount root too, moved since by the host to a name
// to hide. This process lists, as root in the sandbox's user
// namespace, every directory a command could make readable. The
// system's places are those the set-up found (req.system).
func checkCovered(req *setupRequest, targets []string, wsPath string, cov covers) error {
	defaults, others := hideList(req.Hidden, wsPath)
	targets = append(slices.Clone(req.LinkTargets), targets...)
	plan, err := planHiding(append(slices.Clone(defaults), others...), req.Config.Resolved, targets, wsPath, req.system)
	if err != nil {
		return err
	}
	for _, list := range [][]string{plan.outside, plan.inside} {
		for _, h := range list {
			id := plan.ids[h]
			mustExist := (id.Dev != 0 || id.Ino != 0) && within(h, wsPath)
			if err := cov.isCovered(h, mustExist); err != nil {
				return fmt.Errorf("%s: %w", h, err)
			}
		}
	}
	// A link made to a covered file since would show it under its
	// other name.
	for _, h := range slices.Sorted(maps.Keys(cov.files)) {
		var st unix.Stat_t
		if err := unix.Fstat(cov.files[h], &st); err != nil {
			return fmt.Errorf("%s: %w", h, err)
		}
		if err := linkedError(h, wsPath, uint64(st.Nlink)); err != nil {
			return err
		}
	}
	return nil
}

// errNotCovered says a path to hide is not covered in the sandbox.
var errNotCovered = errors.New("appeared or was replaced since the sandbox was set up")

// isCovered checks that path is the root of one of the covers of c, or
// gone (unless mustExist: a path the set-up refuses to find gone).
func (c covers) isCovered(path string, mustExist bool) error {
	// openat, not openat2, which the sandbox's filter refuses by now;
	// the path it opened says whether a link on the way led elsewhere.
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT && !mustExist {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if at, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); err != nil || at != path {
		return fmt.Errorf("a link on the way leads elsewhere (%s)", at)
	}
	var st unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_STATX_DONT_SYNC, unix.STATX_TYPE|unix.STATX_MNT_ID, &st); err != nil {
		return err
	}
	if st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 || st.Mask&unix.STATX_MNT_ID == 0 {
		return errors.New("the kernel does not say which files are mount roots, nor of which mount (statx, Linux 5.8)")
	}
	if st.Attributes&unix.STATX_ATTR_MOUNT_ROOT == 0 || !c.mounts[st.Mnt_id] {
		return errNotCovered
	}
	return nil
}
