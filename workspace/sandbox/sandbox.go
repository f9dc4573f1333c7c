package sandbox

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"
)

// Defaults for zero [Limits] fields.
const (
	DefaultMaxAddressSpace = 4 << 30 // bytes of virtual memory per process
	DefaultMaxFileSize     = 1 << 30 // bytes per file written
	DefaultMaxProcesses    = 512     // processes in the sandbox
	DefaultMaxCPUTime      = 60 * time.Second
	DefaultTmpSize         = 256 << 20 // bytes of the sandbox's own /tmp, and of its /dev/shm
	DefaultMaxOpenFiles    = 1024      // descriptors open per process

	// MinProcesses is the smallest MaxProcesses the kernel can enforce
	// through the namespace's pid_max (RESERVED_PIDS + 1).
	MinProcesses = 300
)

// Limits are the resource limits of a sandboxed command, applied as
// rlimits to the command's shell and inherited by everything it starts.
// Zero fields mean the defaults; negative fields are rejected.
type Limits struct {
	// MaxAddressSpace is RLIMIT_AS: virtual memory per process, in bytes
	// (default DefaultMaxAddressSpace). An allocation past it fails with
	// ENOMEM. It bounds each process, not the command: n processes may
	// use n times as much, up to MaxProcesses; nor does it bound the
	// kernel memory a command makes the kernel hold (pipe and socket
	// buffers, memfd, page tables; see the package documentation).
	MaxAddressSpace int64 `json:"maxAddressSpace"`
	// MaxFileSize is RLIMIT_FSIZE: the largest file a process may write,
	// in bytes (default DefaultMaxFileSize). A write past it gets SIGXFSZ.
	// It bounds each file, not the total written.
	MaxFileSize int64 `json:"maxFileSize"`
	// MaxProcesses bounds the processes in the sandbox (default
	// DefaultMaxProcesses, at least MinProcesses). It is enforced by the
	// PID namespace's pid_max and by RLIMIT_NPROC; the kernel does not
	// apply RLIMIT_NPROC to root, so pid_max is what bounds a fork bomb
	// when the host runs as root.
	MaxProcesses int `json:"maxProcesses"`
	// MaxCPUTime is RLIMIT_CPU per process (default DefaultMaxCPUTime),
	// rounded up to whole seconds. A process past it gets SIGXCPU, and
	// SIGKILL one second later.
	MaxCPUTime time.Duration `json:"maxCPUTime"`
	// MaxOpenFiles is RLIMIT_NOFILE, soft and hard: the descriptors a
	// process may have open (default DefaultMaxOpenFiles). Past it,
	// open, pipe, socket and the like fail with EMFILE.
	MaxOpenFiles int `json:"maxOpenFiles"`
}

// WithDefaults validates l and returns it with zero fields set to the
// defaults.
func (l Limits) WithDefaults() (Limits, error) {
	if l.MaxAddressSpace < 0 || l.MaxFileSize < 0 || l.MaxProcesses < 0 || l.MaxCPUTime < 0 || l.MaxOpenFiles < 0 {
		return l, fmt.Errorf("sandbox limits must not be negative: %+v", l)
	}
	if l.MaxAddressSpace == 0 {
		l.MaxAddressSpace = DefaultMaxAddressSpace
	}
	if l.MaxFileSize == 0 {
		l.MaxFileSize = DefaultMaxFileSize
	}
	if l.MaxProcesses == 0 {
		l.MaxProcesses = DefaultMaxProcesses
	}
	if l.MaxProcesses < MinProcesses {
		return l, fmt.Errorf("sandbox MaxProcesses = %d: the kernel cannot enforce fewer than %d", l.MaxProcesses, MinProcesses)
	}
	if l.MaxCPUTime == 0 {
		l.MaxCPUTime = DefaultMaxCPUTime
	}
	if l.MaxOpenFiles == 0 {
		l.MaxOpenFiles = DefaultMaxOpenFiles
	}
	return l, nil
}

// Config says how to sandbox commands. The zero value is the default
// sandbox: no network, the whole file system read-only but the
// workspace and a private /tmp, readable only beneath [ReadableDirs],
// the workspace and /tmp (with Landlock), the workspace's surroundings
// and the [DefaultHidden] paths hidden, default limits.
type Config struct {
	// AllowNetwork keeps the host's network namespace and does not
	// restrict TCP with Landlock, nor, with the seccomp filter, the
	// kinds of socket a command makes. Commands then reach whatever the
	// host reaches over IP (its loopback services included), and the
	// host's Unix sockets named by a path the sandbox shows: not those
	// beneath /run, which is hidden ([DefaultHidden]), nor in the
	// host's /tmp or /dev/shm, which the sandbox's own cover, but those
	// elsewhere (/var/tmp, /var/lib, …) and in the workspace, unless
	// Landlock is at ABI 9 or later, which refuses every Unix socket
	// not made in the sandbox. Abstract Unix sockets (an "@name") stay
	// confined to the sandbox by Landlock (ABI 6 or later: without it,
	// [Protections].Missing says the host's are reachable), and signals
	// by the PID namespace (and Landlock), whatever the network.
	AllowNetwork bool `json:"allowNetwork"`
	// Hide lists absolute paths made invisible in the sandbox, on top of
	// [DefaultHidden] and the workspace's [Surroundings]: a directory is
	// covered by an empty read-only tmpfs, a file by /dev/null. Links
	// are followed; a path that does not exist is looked for again by
	// each sandbox set up (and as its command starts: [Process.Run]),
	// and hidden once it exists, in the workspace
	// too (see [HiddenPath]), following then the links in the workspace,
	// where commands make them, only to a place in it (a pattern's
	// directory, the workspace itself included). An entry may be a pattern
	// (filepath.Match), matched by ResolveHide and again by each
	// sandbox set up: what matches it then is hidden. Its components
	// with a wildcard match names whatever their case, on a
	// case-sensitive directory too (*.pem hides KEY.PEM); those without
	// one are names, looked up as written ([Glob]), as are those whose
	// wildcards are all escaped (s\[1\] is the name s[1]). "/" and the
	// workspace itself are refused ([CheckHide]). A directory that
	// holds the workspace shows only the directories on the way to it.
	// /tmp and /dev, and what is beneath them outside the workspace,
	// are the sandbox's own, with nothing of the host's: naming them
	// hides nothing (commands keep a writable /tmp and /dev/shm, and
	// their devices). Where a link in the workspace leads an entry out
	// of it as it is opened ([ResolveHide]), on the way to the entry's
	// directory (a pattern's components before its first wildcard, a
	// path's parent, or the deepest of these that exists then), each
	// set-up looks there again ([HiddenPath].LedOut), whatever became
	// of the link. A link reached only through a wildcard (sec/*/a.key,
	// with sec/x -> /elsewhere), or made after the opening, is not
	// followed so: what it led to as the workspace was opened stays
	// hidden, but what appears there later is not, and commands read
	// it unless Landlock keeps them out of that place.
	Hide []string `json:"hide"`
	// Resolved is Hide as [ResolveHide] resolved it, once, before any
	// command ran; a sandbox hides these paths. A Config with Hide and
	// without Resolved is refused: resolved at each set-up, Hide's
	// links would lead where earlier commands made them lead.
	Resolved []HiddenPath `json:"resolved,omitempty"`
	// LinkTargets are the places in the workspace where links (a
	// command's) led the paths to hide at earlier set-ups, each hidden
	// by every later one (see [LinkTargets]). WithDefaults makes a set
	// of the Config's own when there is none, which copies of the Config
	// share; a caller with several Configs on one workspace directory
	// gives each [LinkTargetsOf] that directory. A Config with Resolved
	// and without a set is refused.
	LinkTargets *LinkTargets `json:"-"`
	// TmpSize is the size of the sandbox's private /tmp in bytes
	// (default DefaultTmpSize), and that of its private /dev/shm (POSIX
	// shared memory), another tmpfs of the same bounds. It also bounds
	// the number of files in each: one per page (4 KiB) of its size,
	// for an empty file takes kernel memory that the size does not count.
	TmpSize int64 `json:"tmpSize"`
	// Limits are the commands' resource limits.
	Limits Limits `json:"limits"`
	// WithoutLandlock leaves Landlock out (Protections then says it is
	// missing). It exists to measure what Landlock costs.
	WithoutLandlock bool `json:"withoutLandlock,omitempty"`
}

// WithDefaults validates c and returns a copy with defaults filled in,
// and a new, empty [LinkTargets] when c has none (see [LinkTargetsOf]
// for the set shared by every Config of a workspace directory).
func (c Config) WithDefaults() (Config, error) {
	l, err := c.Limits.WithDefaults()
	if err != nil {
		return c, err
	}
	c.Limits = l
	if c.TmpSize < 0 {
		return c, fmt.Errorf("sandbox TmpSize = %d must not be negative", c.TmpSize)
	}
	if c.TmpSize == 0 {
		c.TmpSize = DefaultTmpSize
	}
	hide := make([]string, len(c.Hide))
	for i, p := range c.Hide {
		if !strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) {
			return c, fmt.Errorf("sandbox Hide[%d] = %q: want an absolute path", i, p)
		}
		hide[i] = p
	}
	c.Hide = hide
	if c.LinkTargets == nil {
		c.LinkTargets = new(LinkTargets)
	}
	return c, nil
}

// Protections says which protections are in force for the commands of a
// workspace. It is one value so that a program can print it or refuse
// to run when something it needs is missing. The zero value means no
// sandbox at all.
type Protections struct {
	// Sandbox is true when commands run under the sandbox helper.
	Sandbox bool `json:"sandbox"`
	// Namespaces lists the namespaces each command gets of its own:
	// some of "user", "pid", "mount", "network", "ipc", "uts".
	Namespaces []string `json:"namespaces,omitempty"`
	// FreshProc: /proc shows only the sandbox's processes.
	FreshProc bool `json:"freshProc,omitempty"`
	// ReadOnlyRoot: everything but the workspace and /tmp is mounted
	// read-only.
	ReadOnlyRoot bool `json:"readOnlyRoot,omitempty"`
	// PrivateTmp: /tmp is an empty tmpfs of the sandbox's own.
	PrivateTmp bool `json:"privateTmp,omitempty"`
	// FreshDev: /dev is the sandbox's own, read-only: the null, zero,
	// full and random devices, pseudo-terminals of its own (a devpts
	// instance), and a private, writable /dev/shm; none of the host's
	// terminals nor its shared memory.
	FreshDev bool `json:"freshDev,omitempty"`
	// Hidden lists the paths hidden in the sandbox, resolved: the
	// defaults, the workspace's surroundings and the configured ones
	// that exist, where links led them as the workspace was opened
	// ([ResolveHide]). It names the host's paths, outside the
	// workspace too: it is for the host (its logs, its operator), not
	// for whoever runs commands, whom [InWorkspaceTerms] speaks to.
	Hidden []string `json:"hidden,omitempty"`
	// LinkTargets are the places of [LinkTargets] as the sandbox was
	// set up (hidden, and among Hidden): where links a command made at
	// paths to hide led, hidden from every later command whatever
	// became of the links, which may be why a directory of the
	// workspace looks empty to commands. Only the host can drop them
	// ([LinkTargets.Forget]).
	LinkTargets []string `json:"linkTargets,omitempty"`
	// Landlock is the Landlock ABI version in force (0 = none): reads
	// only beneath [ReadableDirs], the workspace and /tmp, writes
	// only beneath the workspace and /tmp, no mounts, from ABI 6 no
	// signal nor abstract Unix socket out of the sandbox, from ABI 9 no
	// Unix socket made outside it reached by its path (which matters
	// when the network is allowed: without it no Unix socket can be
	// made), and with LandlockNetwork no TCP bind or connect.
	Landlock        int  `json:"landlock,omitempty"`
	LandlockNetwork bool `json:"landlockNetwork,omitempty"`
	// AlsoReadable lists, when Landlock is in force, what it lets
	// commands read and run programs from besides [ReadableDirs], the
	// workspace, /tmp and /dev/shm: where the links directly in /etc
	// lead (see ReadableDirs), files or directories (and what is
	// beneath them), and the files [KeptWithNetwork] lead to, as the
	// sandbox was set up. [Protections.CheckRunnable] counts them.
	AlsoReadable []string `json:"alsoReadable,omitempty"`
	// NoNetwork: commands have no network (their own empty network
	// namespace).
	NoNetwork bool `json:"noNetwork,omitempty"`
	// NoCapabilities: the command runs with an empty capability bounding
	// set and no_new_privs.
	NoCapabilities bool `json:"noCapabilities,omitempty"`
	// Seccomp: a system call filter refuses, with EPERM, sockets other
	// than TCP/IP ones when there is no network (Unix sockets, netlink,
	// …, and datagram socket pairs; stream and sequenced-packet pairs
	// stay allowed), new namespaces, io_uring, the kernel's keyrings,
	// and setting the set-user-ID or set-group-ID bit on a file. The
	// command also starts with a new, empty session keyring.
	Seccomp bool `json:"seccomp,omitempty"`
	// Limits are the resource limits in force; ProcessesByPidMax says the
	// process limit is also enforced through the namespace's pid_max.
	Limits            *Limits `json:"limits,omitempty"`
	ProcessesByPidMax bool    `json:"processesByPidMax,omitempty"`
	// ClosedFDs: the command inherits only descriptors 0, 1 and 2.
	ClosedFDs bool `json:"closedFDs,omitempty"`
	// DiesWithHost: the sandbox's first process is PID 1 of its
	// namespace and exits when its control pipe from the host ends, so
	// every process of the command dies when the call ends or the host
	// dies.
	DiesWithHost bool `json:"diesWithHost,omitempty"`
	// Missing says, in words, what was asked for and is not in force,
	// and why. Empty when nothing is missing.
	Missing []string `json:"missing,omitempty"`
}

// String is one line for logs and a program's start-up banner.
func (p Protections) String() string {
	if !p.Sandbox {
		s := "no sandbox"
		if len(p.Missing) > 0 {
			s += " (" + strings.Join(p.Missing, "; ") + ")"
		}
		return s
	}
	var parts []string
	parts = append(parts, "namespaces: "+strings.Join(p.Namespaces, ","))
	add := func(on bool, s string) {
		if on {
			parts = append(parts, s)
		}
	}
	add(p.FreshProc, "fresh /proc")
	add(p.ReadOnlyRoot, "read-only root")
	add(p.PrivateTmp, "private /tmp")
	add(p.FreshDev, "own /dev")
	if len(p.Hidden) > 0 {
		parts = append(parts, "hidden: "+strings.Join(p.Hidden, ","))
	}
	if len(p.LinkTargets) > 0 {
		parts = append(parts, "hidden because a link led there: "+strings.Join(p.LinkTargets, ","))
	}
	if p.Landlock > 0 {
		s := fmt.Sprintf("landlock ABI %d", p.Landlock)
		if p.LandlockNetwork {
			s += " (+tcp)"
		}
		parts = append(parts, s)
	}
	add(p.NoNetwork, "no network")
	add(p.NoCapabilities, "no capabilities")
	add(p.Seccomp, "seccomp")
	if p.Limits != nil {
		l := p.Limits
		parts = append(parts, fmt.Sprintf("limits: as=%dMiB fsize=%dMiB procs=%d cpu=%s nofile=%d",
			l.MaxAddressSpace>>20, l.MaxFileSize>>20, l.MaxProcesses, l.MaxCPUTime, l.MaxOpenFiles))
	}
	add(p.ClosedFDs, "fds 0-2 only")
	add(p.DiesWithHost, "dies with host")
	s := "sandbox: " + strings.Join(parts, "; ")
	if len(p.Missing) > 0 {
		s += "; MISSING: " + strings.Join(p.Missing, "; ")
	}
	return s
}

// Complete reports whether every protection of the default sandbox is in
// force (network only when not allowed).
func (p Protections) Complete() bool {
	return p.Sandbox && len(p.Missing) == 0
}

// ErrUnsupported is wrapped by the errors that say this system cannot
// sandbox commands: another OS, no user namespaces (creating them
// fails), or namespaces whose root may not mount anything (the first
// mount of the set-up fails: a security module's restriction of
// unprivileged user namespaces does that). Any other set-up error is a
// bad configuration ([ErrConfig]) or a failure, never a reason to run
// commands unsandboxed: a later step the system refuses is either done
// without and named in [Protections].Missing or fails the set-up.
var ErrUnsupported = errors.New("sandbox not supported on this system")

// ErrResources is wrapped by the errors that say a sandbox could not be
// set up for want of a resource: the user's quota of namespaces, memory,
// processes or descriptors (ENOSPC, ENOMEM, EAGAIN, EMFILE, ENFILE). The
// system supports the sandbox, so such an error is never [ErrUnsupported]
// and never a reason to run commands unsandboxed: it is the error of the
// call that needed the sandbox.
var ErrResources = errors.New("sandbox: out of resources")

// markedError is err, also matching mark for errors.Is, with err's text.
type markedError struct{ err, mark error }

func (e markedError) Error() string   { return e.err.Error() }
func (e markedError) Unwrap() []error { return []error{e.err, e.mark} }

// unsupportedError marks err as [ErrUnsupported], or as [ErrResources]
// when it comes from a resource running out: a step that fails for that
// reason fails on a system that supports it.
func unsupportedError(err error) error {
	if isResourceError(err) {
		return markedError{err, ErrResources}
	}
	return markedError{err, ErrUnsupported}
}

// isResourceError reports whether err is one of the errors a system call
// fails with when a resource runs out.
func isResourceError(err error) bool {
	for _, e := range []error{syscall.ENOSPC, syscall.ENOMEM, syscall.EAGAIN, syscall.EMFILE, syscall.ENFILE} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// InWorkspaceTerms returns what err, an error of this package, says in
// the terms of the workspace it sandboxes, when it has such a text:
// the places it names are in the workspace, relative to it, and no
// other path of the host's is named (a pattern to hide outside the
// workspace is said to be one, not named), so that it may be shown to
// whoever runs commands there. The error's own text, for the host, may
// name any path. ok is false for an error without such a text: a
// caller that shows errors to someone who is not to learn the host's
// paths then says what happened by the sentinel the error wraps
// ([ErrResources], [ErrConfig], …). [ErrTooManyHidden] has one.
func InWorkspaceTerms(err error) (text string, ok bool) {
	var wt workspaceTermsError
	if errors.As(err, &wt) {
		return wt.text, true
	}
	return "", false
}

// workspaceTermsError is err, with what it says in the workspace's
// terms (text; see InWorkspaceTerms).
type workspaceTermsError struct {
	err  error
	text string
}

func (e workspaceTermsError) Error() string { return e.err.Error() }
func (e workspaceTermsError) Unwrap() error { return e.err }

// Exit is how a sandboxed command's shell ended.
type Exit struct {
	// Code is the shell's exit status; -1 when it was killed by a signal.
	Code int `json:"code"`
	// Signal is the signal that killed the shell (0 if none).
	Signal int `json:"signal,omitempty"`
}

// ErrStartFailed is wrapped by the error of [Process.Finish] when the
// command's shell could not be started in the sandbox (the fork or the
// exec failed): nothing of the command ran.
var ErrStartFailed = errors.New("sandbox: the command's shell could not be started")

// ErrPreparedStale is wrapped by the error of [Process.Run] when a path
// to hide changed after the sandbox was prepared: one appeared (a path
// missing then, a new match of a pattern) or was removed or replaced
// (its cover goes with the file it covered), which the sandbox does not
// hide, or there are more than [MaxHidden]; or when the host forgot
// places of the Config's [LinkTargets] since ([LinkTargets.Forget]),
// which the sandbox still hides; or when a link of [EtcLinkDirs] leads
// elsewhere than it did (the administrator moved the trust store, say),
// where the sandbox's Landlock domain still lets commands read. The command was not started; a
// sandbox prepared now hides what is there now.
var ErrPreparedStale = errors.New("sandbox: a path to hide changed since the sandbox was prepared")

// ErrKilledAtStart is wrapped, with the context's cause, by the error of
// [Process.RunContext] when its context ended just as the helper started
// the command: after the helper had said that it starts it (it forks
// the command's shell right after saying so), before the host took note.
// The helper was killed, and everything in the sandbox with it, but the
// command may have run briefly first: unlike any other error of
// RunContext, this one does not mean that the command never ran. The
// caller reads what the command wrote, if it wants it, and finishes the
// Process as after a successful Run ([Process.Finish], which then reports
// the helper killed): it need not release it.
var ErrKilledAtStart = errors.New("sandbox: given up as the command started, the helper killed: the command may have run briefly")
