package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/polyweave/polyweave-go/workspace/sandbox"
)

// Tool names and descriptions, as a tool binding registers them. The names
// are the seed's; the descriptions are what the model reads.
const (
	ReadFileToolName   = "read_file"
	WriteFileToolName  = "write_file"
	RunCommandToolName = "run_command"

	ReadFileDescription = "Read a UTF-8 text file from the workspace. " +
		"The path is relative to the workspace root; an empty path lists the files at the root, " +
		"and a directory path lists that directory. Large files are cut and marked truncated; " +
		"binary files are reported as binary without content."
	WriteFileDescription = "Write a text file in the workspace, replacing it atomically. " +
		"The path is relative to the workspace root; missing parent directories are created."
	// RunCommandDescription is run_command's description before what
	// the sandbox allows, which [Workspace.CommandDescription] adds from
	// the workspace's protections.
	RunCommandDescription = "Run a shell command (sh -c) in the workspace directory and return its " +
		"exit code, stdout and stderr. Stdin is empty; output is capped per stream; the command and " +
		"everything it started are killed when it finishes or times out."
)

// Defaults applied for zero-valued [Options] fields.
const (
	DefaultMaxReadBytes   = 1 << 20
	DefaultMaxListEntries = 1000
	DefaultCommandTimeout = 30 * time.Second // the seed's default
	DefaultMaxOutputBytes = 1 << 20          // the seed's maxBuffer, per stream here
	DefaultKillGrace      = 1 * time.Second
	DefaultWaitDelay      = 1 * time.Second
	DefaultShell          = "/bin/sh"
	DefaultMaxWriteBytes  = 16 << 20
	DefaultSetupTimeout   = 30 * time.Second

	// defaultPath is used for commands when PATH is inherited but unset.
	defaultPath = "/usr/local/bin:/usr/bin:/bin"
)

// DefaultInheritEnv lists the environment variables a command inherits
// from the current process when [Options.InheritEnv] is nil. HOME is not
// inherited: it is always set to the workspace directory. On Windows the
// list also has what programs there need to run: SystemRoot, ComSpec,
// PATHEXT, TEMP and TMP.
var DefaultInheritEnv = append([]string{"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ", "TMPDIR"}, systemInheritEnv...)

// Limits are the resource limits of sandboxed commands; see
// [sandbox.Limits] for each field and its default.
type Limits = sandbox.Limits

// Protections says which protections are in force for a workspace's
// commands; see [sandbox.Protections] and [Workspace.Protections].
type Protections = sandbox.Protections

// SandboxMode says whether commands run in the sandbox.
type SandboxMode int

const (
	// SandboxAuto (the default) sandboxes commands where the system
	// allows it and otherwise runs them unsandboxed, logging a warning
	// and saying so in [Workspace.Protections]: only when the system
	// cannot sandbox at all ([sandbox.ErrUnsupported]: another OS, no
	// user namespaces, or namespaces whose root may not mount anything,
	// or not a /proc, as in a container whose /proc has masked parts).
	// A protection the system refuses once the namespaces work is either
	// listed in Protections.Missing or makes New fail (see the package
	// documentation), never a reason to run commands unsandboxed.
	// Any other failure to set the sandbox up makes New fail rather
	// than run commands unsandboxed: a configuration the sandbox cannot
	// honour, a resource that ran out ([sandbox.ErrResources]: the
	// user's quota of namespaces, memory, processes or descriptors),
	// or another error.
	SandboxAuto SandboxMode = iota
	// SandboxRequired makes New fail when the sandbox, with every
	// protection it sets up, is not available.
	SandboxRequired
	// SandboxOff runs commands without the sandbox: a new session and
	// process group, killed as a group (see the package documentation
	// for what that does not stop).
	SandboxOff
)

// ErrSandboxUnavailable is wrapped by the error of New when the options
// require the sandbox and it, or one of its protections, is not
// available.
var ErrSandboxUnavailable = errors.New("workspace: sandbox required but not available")

// ErrSystemRoot is wrapped by the error of [New] when the root is "/" or
// a system directory (or one beneath it, see New) and
// [Options.AllowSystemRoot] is not set. A caller tells it apart with
// errors.Is, to ask for a folder inside it instead.
var ErrSystemRoot = errors.New("workspace: the root is a system directory")

// ErrClosed is returned by [Workspace.ReadFile], [Workspace.WriteFile] and
// [Workspace.RunCommand] once [Workspace.Close] has been called, including
// for a command that was still running, or whose sandbox was still being
// set up, when Close was called.
var ErrClosed = errors.New("workspace: closed")

// Options configures a [Workspace]. A nil *Options and every zero field
// mean the documented default. New copies the options, so a caller may
// reuse or change the struct afterwards.
type Options struct {
	// AllowedExtensions, when non-nil, restricts read_file and write_file
	// to files whose extension (as filepath.Ext reports it, compared
	// case-insensitively, with the leading dot: ".md") is in the list. The
	// check applies both to the requested name and, for a symbolic link, to
	// the name it resolves to. Nil allows any extension; an empty non-nil
	// list is rejected by New.
	AllowedExtensions []string

	// MaxReadBytes caps how much of a file read_file returns (default
	// DefaultMaxReadBytes). A longer file is cut and marked truncated.
	MaxReadBytes int64

	// MaxListEntries caps a directory listing (default
	// DefaultMaxListEntries). The listing holds the lexically smallest
	// names, sorted, and is marked truncated when entries were left out.
	MaxListEntries int

	// CommandTimeout bounds a run_command call (default
	// DefaultCommandTimeout, the seed's 30 s), from the call's start:
	// setting the command's sandbox up, or waiting for the one being
	// prepared ahead, counts. A sandbox not ready by then is given up
	// (its set-up killed) and the call answers that the command timed
	// out and never ran; a command still running then is killed (after
	// KillGrace) and the call answers with what it printed. A sandbox
	// prepared ahead of the next command is given up, and killed, when
	// setting it up takes longer than this. The sandbox New sets up to
	// learn the protections is bounded by SetupTimeout instead.
	CommandTimeout time.Duration

	// SetupTimeout bounds the set-up of the sandbox New makes to learn
	// which protections commands get (default DefaultSetupTimeout): a
	// set-up not done by then is stopped (its helper killed), and New
	// fails with an error that says so, wrapping
	// context.DeadlineExceeded, rather than hang. Nothing is set up, so
	// nothing is bounded, with SandboxOff, nor when an earlier Workspace
	// on the same directory, with the same configuration (and the same
	// lists of package sandbox: DefaultHidden, ReadableDirs, …), learnt
	// them.
	SetupTimeout time.Duration

	// MaxOutputBytes caps stdout and stderr each (default
	// DefaultMaxOutputBytes), as the model reads them: each stream's JSON
	// string, escapes included (a NUL byte is \u0000, six bytes), holds
	// at most this many bytes. Output past the cap is read and discarded,
	// so a chatty command never blocks on a full pipe, and the stream is
	// marked truncated.
	MaxOutputBytes int

	// KillGrace is how long a timed-out or cancelled command's process
	// group has between SIGTERM and SIGKILL (default DefaultKillGrace).
	// It does not apply on Windows, which kills at once.
	KillGrace time.Duration

	// WaitDelay bounds how long run_command waits for the output pipes to
	// close after the command's process group was killed (default
	// DefaultWaitDelay). Only a process that left the group (for example
	// with setsid) can hold them that long; its output is then cut off.
	// It plays the part of exec.Cmd.WaitDelay, which does not apply here
	// because run_command owns the pipes and drains them itself.
	WaitDelay time.Duration

	// InheritEnv names the environment variables a command inherits from
	// the current process (nil means DefaultInheritEnv; an empty non-nil
	// list inherits nothing). HOME is always set to the workspace
	// directory and PATH falls back to a minimal default when not
	// inherited. In the sandbox, a TMPDIR that leads neither to /tmp
	// nor into the workspace is set to /tmp, where temporary files can
	// be made. Nothing else leaks in: no tokens, keys or agent sockets.
	InheritEnv []string

	// Shell runs commands as `Shell -c command` (default DefaultShell).
	// On Windows it must name a POSIX shell, such as Git for Windows'
	// sh.exe.
	Shell string

	// MaxWriteBytes caps the content of one write_file call in bytes
	// (default DefaultMaxWriteBytes). A larger write is refused with
	// ReasonTooLarge and writes nothing.
	MaxWriteBytes int64

	// Sandbox says whether commands run in the sandbox (default
	// SandboxAuto: where the kernel allows it).
	Sandbox SandboxMode

	// AllowNetwork gives sandboxed commands the host's network. By
	// default they have none. With it they reach what the host reaches
	// over IP, and its Unix sockets named by a path they see, but for
	// those beneath /run (hidden) and, with Landlock ABI 9, all of them:
	// see [sandbox.Config.AllowNetwork].
	AllowNetwork bool

	// HidePaths lists absolute paths that sandboxed commands cannot see
	// (an empty directory or an empty file stands in their place), on
	// top of what the sandbox hides by default (the workspace's
	// surroundings, /root, /home, the system's secrets, and /run but
	// for the name resolver's configuration: see [sandbox.DefaultHidden]
	// and [sandbox.Surroundings]). An entry may be a pattern
	// (filepath.Match), whose components with a wildcard match names
	// whatever their case (*.pem hides KEY.PEM; see [sandbox.Glob]).
	// New refuses "/", the workspace itself, and a
	// path that cannot be resolved. Everything else outside the
	// workspace stays as it was, read-only, and readable beneath the
	// system's directories ([sandbox.ReadableDirs]) when Landlock is in
	// force, and everywhere the host's user may read without it; a
	// path that holds the workspace shows only the way to it, and the
	// workspace with all it holds (for write_file too, nothing in it is
	// a path to hide for that entry).
	//
	// Paths beneath /tmp and /dev outside the workspace hide nothing,
	// and need not: a sandbox has a /tmp and a /dev of its own, with
	// nothing of the host's in them.
	//
	// What is hidden, and when:
	//   - A file to hide in the workspace has one name: a sandbox covers
	//     the name, not the file, and its other names would show it. A
	//     file at a path to hide, or matched by a pattern, with more than
	//     one hard link (ln .env notes.txt, by the host or a program
	//     outside the sandboxes, or a command's link before the file's
	//     content was written in place) refuses the set-up, and so New
	//     and every command ([sandbox.ErrHiddenLinked]; the error names
	//     the path, run_command's in the workspace's terms), the command
	//     a sandbox was prepared for included, until the host removes
	//     the other links (find -samefile names them) or puts a copy in
	//     their place (the other names may be anywhere on the file
	//     system, and each set-up counts the links, where finding the
	//     names would take a walk of it). write_file and undo make no
	//     link: they write a new file and rename it into place. A file
	//     to hide outside the workspace is not checked: its other names
	//     are seen where a sandbox shows their directory.
	//   - New follows the links of each entry, once: what a path led to
	//     then is hidden, whatever commands do to the link later; what a
	//     pattern matched then is hidden as a path that existed then;
	//     and a pattern, or a path not there yet, whose directory a
	//     link in the workspace led out of it (keys -> /srv/keys, for
	//     keys/*.pem or keys/a.pem) is looked for at each set-up where
	//     the link led then (/srv/keys/*.pem, /srv/keys/a.pem), whatever
	//     became of the link. Not where such a link leads into a system
	//     directory: see below.
	//   - Each command's sandbox, as it is set up (which may be ahead of
	//     the command: see [Workspace.Warm]), also hides an entry that
	//     did not exist when New ran, resolved again then, and each
	//     pattern's matches, matched again then ([sandbox.HiddenPath]).
	//     Links in the workspace, which commands make, are followed only
	//     to a place in the workspace, which is then hidden: what a link
	//     a command planted at a path to hide leads to (not the workspace
	//     itself), and the matches of a pattern where a link at its
	//     directory (config, for config/*.key) leads, the workspace
	//     itself included (config -> .: the host's config/a.key is a.key,
	//     hidden there; config/* would then hide all the workspace holds,
	//     never the workspace). The link is no mount point: a command can
	//     remove or retarget it. Every later command's sandbox, of this
	//     Workspace and of every other open on the same directory, for
	//     as long as the process runs, hides each place such a link led
	//     to all the same, under its real name, until it no longer
	//     exists ([sandbox.LinkTargets]). No command can undo that (ln -s
	//     src .env; rm .env hides src for good): the places are listed by
	//     [Workspace.LinkTargets] (and Protections), and the host drops
	//     them with [Workspace.ForgetLinkTargets] once it knows no
	//     secret was written through a link to them.
	//     It hides [sandbox.MaxHidden] paths at most: beyond that no
	//     command runs ([sandbox.ErrTooManyHidden]; the error names the
	//     patterns that match the most, and how many places links led
	//     to it hides), not even one that would remove matches: the host
	//     must remove them (see [sandbox.MaxHidden]) or forget places
	//     ([Workspace.ForgetLinkTargets]).
	//   - As the command starts, its sandbox looks again, from inside:
	//     when a path to hide appeared, or was removed or replaced (by
	//     anyone, the file tools included), since the set-up, a new
	//     sandbox is set up. What exists when a command starts is
	//     hidden from it; an entry inside the workspace that existed
	//     when New ran and was moved or replaced since from outside the
	//     file tools refuses the commands instead
	//     ([sandbox.ErrHiddenMoved]). A file that write_file or undo
	//     puts in its place, or the nothing undo's removal leaves, is
	//     what the sandboxes expect there from then on (unless the
	//     entry held another file already): those of every workspace
	//     open on the directory in the process, and, where the file
	//     system keeps user extended attributes, in other processes
	//     (for a file written; a removal is the process's to know).
	//   - A path inside the workspace is hidden from commands, not from
	//     the file tools. A command cannot rename or remove a path that
	//     exists when its sandbox is set up, nor a directory on the way
	//     to one, one a pattern's wildcard matched included (a directory
	//     moved deeper would match no more): each is a mount point in
	//     the sandbox, so removing it (rm -rf) fails with EBUSY, and
	//     rename(2) of a file into or out of it fails with EXDEV (mv
	//     falls back to copying; git mv, os.rename and the like fail).
	//     A directory on the way to where nothing is yet (a pattern's
	//     directory with no match, say) is no mount point: a command can
	//     rename it, remove it when empty, and put a link in its place,
	//     which the next set-up follows as said above.
	//
	// What is not hidden:
	//   - What an entry, a pattern's directory or a match leads to
	//     through a link in the workspace, when that is a system
	//     directory commands read ([sandbox.ReadableDirs]: /usr, /etc,
	//     /opt, …), in one, or holds one (.env -> /etc/app/env, keys ->
	//     /opt/app/keys for keys/*.pem): the link may be a command's,
	//     which would otherwise make every later sandbox hide what
	//     commands need to run. New logs a warning naming each such
	//     entry; name the path there itself in HidePaths to hide it.
	//   - From a command already running when a path to hide appears,
	//     or is replaced from outside the file tools (a new file renamed
	//     over it, as editors save, mv, os.Rename; or removed and made
	//     again), or gets another hard link: its sandbox does not cover
	//     the new file, nor the other name, and the command can read,
	//     copy or move it. The kernel detaches a mount, in every
	//     namespace, when its mount point is renamed over or removed,
	//     so the cover the command's sandbox put on the old file goes
	//     with it; nothing a sandbox can mount or ask of Landlock keeps
	//     the new one hidden (a cover on its directory would hide the
	//     directory's other entries, and Landlock grants access beneath
	//     a directory, the workspace, without exceptions in it). The
	//     commands after a replacement are refused
	//     ([sandbox.ErrHiddenMoved]). The file tools do not write a path
	//     to hide while a sandboxed command runs, nor while the
	//     processes of one killed may still run: write_file and undo
	//     refuse then (ReasonHiddenInUse). A host that changes a path to
	//     hide should do it with write_file, or hold an exclusive
	//     flock(2) on the workspace's root directory while it does
	//     (flock -x /the/workspace mv .env.new .env): the lock waits for
	//     running commands, as the tools' writes do, and commands that
	//     start meanwhile wait for it; a path to hide written in place
	//     (its content only, the same file) stays covered.
	//   - What a symbolic link at a path to hide, or at any directory on
	//     the way to one or to a pattern's match, leads to outside the
	//     workspace, when a command made the link before the path
	//     existed: the sandbox hides no path a command's link names
	//     there. write_file refuses to write through such a
	//     link (ReasonLinkToHidden, as for one that leads into the
	//     workspace), but a program that writes the path itself
	//     (os.WriteFile, say) follows it, and may put the content where
	//     commands can read it (the system's directories are readable).
	//   - Where a command's link at a path to hide, or on the way to
	//     one, led, once the process has restarted, or once the host
	//     forgot the place ([Workspace.ForgetLinkTargets]): the places
	//     links led to are kept in memory only, one set per workspace
	//     directory for the process's lifetime, shared by every
	//     Workspace open on it ([sandbox.LinkTargetsOf]). A Workspace
	//     opened after a restart follows the links there when New
	//     runs, and hides their targets for good, but not where a link
	//     removed before led: what the host wrote through it is shown
	//     under its real name (notes.txt for a link .env -> notes.txt).
	//     write_file refuses to write through such a link.
	//   - A hard link a command made to a file at a path to hide before
	//     its content was written in place (ln notes.txt .env, then the
	//     host's os.WriteFile of .env), to the command that made it, or
	//     any other running as the content is written: the content is
	//     visible through the other name. The next sandbox refuses its
	//     command (see above). write_file replaces the file (a new one,
	//     renamed into place) and refuses a file with more than one
	//     link; other writers may not.
	// A program that writes secrets into the workspace should write them
	// with write_file. Checking the path alone with Lstat does not do:
	// a link may stand at any directory on the way to it. Otherwise
	// check each component from the workspace down (Lstat: no link at
	// any, and the file's link count), and write while no command runs
	// (a running command can plant a link between the check and the
	// write).
	HidePaths []string

	// Limits are the resource limits of sandboxed commands (zero fields
	// mean the defaults of [sandbox.Limits]).
	Limits Limits

	// AllowSystemRoot lets New open "/" or a system directory such as
	// /etc or /usr, or a directory beneath one such as /etc/cron.d, as
	// the workspace root, which it refuses otherwise (see [New]).
	AllowSystemRoot bool

	// Logger receives debug records for refusals and warnings for cleanup
	// failures. Nil discards.
	Logger *slog.Logger
}

// Workspace gives confined file access and command execution beneath one
// root directory. All file access goes through an [os.Root], so no name,
// symlink or rename race can reach outside the root.
//
// A Workspace is safe for concurrent use by multiple goroutines. It must be
// created with [New]; the zero value is not usable. Call [Workspace.Close]
// when done.
type Workspace struct {
	root     *os.Root
	rootDir  *os.File        // the root directory, opened through root: where commands start
	dir      string          // absolute workspace directory, symbolic links resolved: HOME
	sandbox  *sandbox.Config // nil: commands run unsandboxed
	devNull  *os.File        // unsandboxed commands' stdin, opened once
	prot     Protections
	opts     Options
	exts     map[string]bool // lower-cased allowed extensions; nil = any
	env      []string
	log      *slog.Logger
	shell    string
	closed   context.Context // done once Close has begun
	closeNow context.CancelFunc
	mu       sync.Mutex // guards shut
	shut     bool

	// hideMu guards commands, the sandboxed run_command calls under way
	// and the sandboxes of ended ones whose processes may still run
	// (reapLater). A write of a path hidden from commands holds it while
	// it writes, and is refused while commands is not zero (hiddenWrite).
	// hideLock, the root opened again, carries the workspace's share of
	// that rule with the other workspaces open on the directory, of the
	// process or others (tryLockHideShared): held shared while commands is
	// not zero, exclusive while a hidden path is written; nil until first
	// needed.
	hideMu   sync.Mutex
	commands int
	hideLock *os.File
	// hiddenIDs, guarded by hideMu, is what the sandboxes take the
	// paths to hide to be once the tools of a workspace open on the
	// directory wrote one that had an identity (see currentHiddenIDs);
	// nil until then. It is replaced, never
	// changed in place.
	hiddenIDs []sandbox.HiddenPath
	// book is where the process notes the writes of paths hidden from
	// commands of the workspaces open on the directory (hiddenBook);
	// nil without a sandbox.
	book *hiddenBook

	calls    sync.WaitGroup // in-flight calls
	once     sync.Once
	closeErr error

	// The sandbox of the next command, prepared ahead (see takePrepared).
	warmMu  sync.Mutex
	warm    *prepared      // ready for a command
	warming *preparation   // the preparation under way; nil if none
	prepErr error          // why the latest preparation that ended failed; nil if it succeeded
	warmers sync.WaitGroup // preparations under way
	reapers sync.WaitGroup // helpers of finished commands, being reaped

	// hookStarted, when set by tests, is called with the pid of the
	// shell or sandbox helper of each command once it started.
	hookStarted func(pid int)

	// hookWaitPrepared, when set by tests, runs when a command is about
	// to wait for the sandbox being prepared for it.
	hookWaitPrepared func()
	// hookPrepare, when set by tests, runs as a sandbox's preparation
	// starts, with the context that bounds it; an error makes the
	// preparation fail with it.
	hookPrepare func(ctx context.Context) error
	// hookWarm, when set by tests, runs in Warm before (waited false)
	// and after (true) its n-th wait for a preparation.
	hookWarm func(n int, waited bool)

	// hookAfterCheck, when set by tests, runs after a write's name (or
	// an undo's restore's) is checked and before the write chooses what
	// it replaces.
	hookAfterCheck func()
	// hookBeforeRename, when set by tests, runs after the temporary file of
	// a write is complete and before it is renamed into place; an error
	// makes the write fail there.
	hookBeforeRename func() error
	// hookHandOver, when set by tests, runs before a command is handed
	// to the sandbox taken for it.
	hookHandOver func()
	// hookBeforeRun, when set by tests, runs before a sandbox prepared
	// again for a command (the one prepared ahead was stale) is given
	// the command.
	hookBeforeRun func()
	// hookCrash, when set by tests, is called by a write once its
	// temporary file is written and synced; true stops the write there,
	// failed, as a crash would: the temporary file is left behind.
	hookCrash func() bool
	// hookHiddenTempWait, when set by tests, is called by a write of a
	// path hidden from commands that is to wait for another (of any
	// workspace of the process) to be done with hiddenTempName.
	hookHiddenTempWait func()
	// hookHideLockWait, when set by tests, is called by a command's
	// start that finds the lock on the root it shares with the other
	// workspaces open on the directory held exclusive elsewhere, before
	// it waits for it (see commandBegins); w.hideMu is not held.
	hookHideLockWait func()
	// hookReap, when set by tests, runs before the helper of an ended
	// sandboxed command is reaped, in the goroutine that reaps it.
	hookReap func()
	// hookFinished, when set by tests, is given what a sandbox's
	// helper reported of its command, and returns what the workspace
	// takes it to have reported (a shell it could not fork, say).
	hookFinished func(sandbox.Exit, error) (sandbox.Exit, error)

	// nameByPath makes the file tools learn the name of a file they opened
	// by resolving the path they opened it by through the root, rather
	// than from the kernel (see realName). It is set where the kernel has
	// no name for an open file, and by tests, to run the same cases both
	// ways.
	nameByPath bool

	// hookBeforeName, when set by tests, runs after a file is opened and
	// before the name it resolves to is learnt.
	hookBeforeName func()

	// sys holds the system calls tests replace (see sysCalls).
	sys sysCalls
}

// New opens the directory root as a workspace. root must exist and be a
// directory; it is made absolute and its symbolic links are resolved
// once, here: the file tools and commands use that very directory from
// then on, even if a link on the way is changed. The empty path, "/" and
// system directories are refused unless [Options.AllowSystemRoot] is
// set: /etc, /proc, /sys, /dev, /boot, /usr (but for /usr/local and
// /usr/src) and the other directories of programs and libraries, with
// everything beneath them; and the top directories of homes, temporary
// files and data (/home, /root, /tmp, /var, /var/tmp, …) themselves, but
// not what is beneath them. No sandbox is set up around "/", which it
// would not confine: there, New fails unless the sandbox is off.
//
// Unless [Options.Sandbox] is SandboxOff, New also sets up a sandbox to
// learn which protections commands get ([Workspace.Protections]), once
// per workspace directory, configuration (package sandbox's lists,
// such as DefaultHidden, included) and process, and keeps it for
// the first command; a set-up not done within [Options.SetupTimeout]
// is stopped, and New fails.
// With SandboxRequired it fails, wrapping ErrSandboxUnavailable, when any
// is missing. The options are validated and copied; see [Options] for the
// defaults.
func New(root string, opts *Options) (*Workspace, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := o.fillDefaults(); err != nil {
		return nil, fmt.Errorf("workspace options: %w", err)
	}
	shell, err := exec.LookPath(o.Shell)
	if err != nil {
		return nil, fmt.Errorf("workspace shell: %w", err)
	}
	if strings.TrimSpace(root) == "" {
		return nil, errors.New("workspace root: empty path (use \".\" for the current directory)")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("workspace root: %w", err)
	}
	dir, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("workspace root: %w", err)
	}
	if !o.AllowSystemRoot && isSystemDir(dir) {
		return nil, fmt.Errorf("%w: %s; set Options.AllowSystemRoot to use it", ErrSystemRoot, dir)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open workspace root: %w", err)
	}
	rootDir, err := r.Open(".")
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("open workspace root: %w", err)
	}
	closed, closeNow := context.WithCancel(context.Background())
	w := &Workspace{
		closed:   closed,
		closeNow: closeNow,
		root:     r,
		rootDir:  rootDir,
		dir:      dir,
		opts:     o,
		log:      o.Logger,
		shell:    shell,

		nameByPath: !kernelNames,
	}
	if o.AllowedExtensions != nil {
		w.exts = make(map[string]bool, len(o.AllowedExtensions))
		for _, e := range o.AllowedExtensions {
			w.exts[strings.ToLower(e)] = true
		}
	}
	w.env = buildEnv(o.InheritEnv, dir)
	if hookNew != nil {
		hookNew(w)
	}
	if err := w.setUpSandbox(); err != nil {
		w.closeBook()
		rootDir.Close()
		r.Close()
		return nil, err
	}
	if w.sandbox != nil {
		w.env = sandboxTMPDIR(w.env, dir)
		if err := w.checkShell(); err != nil {
			w.releaseWarm()
			w.closeBook()
			rootDir.Close()
			r.Close()
			return nil, err
		}
	}
	if w.sandbox == nil {
		if w.devNull, err = os.Open(os.DevNull); err != nil {
			rootDir.Close()
			r.Close()
			return nil, fmt.Errorf("commands' stdin: %w", err)
		}
	}
	return w, nil
}

// hookNew, when set by tests, is called by New with the Workspace before
// it sets the sandbox up.
var hookNew func(w *Workspace)

// setUpSandbox probes the sandbox and decides how commands run.
func (w *Workspace) setUpSandbox() error {
	o := &w.opts
	if o.Sandbox == SandboxOff {
		w.prot = Protections{Missing: []string{"sandbox turned off by Options.Sandbox"}}
		return nil
	}
	// Where links led paths to hide is kept for the directory, not for
	// this Workspace: every Workspace open on it hides those places.
	// So are the writes of paths to hide of the file tools (openBook),
	// from before the paths are resolved.
	w.openBook()
	cfg, err := sandbox.Config{AllowNetwork: o.AllowNetwork, Hide: o.HidePaths, Limits: o.Limits,
		LinkTargets: sandbox.LinkTargetsOf(w.dir)}.WithDefaults()
	var ledToSystem []sandbox.LinkToSystem
	if err == nil {
		// Resolved once, here: a sandbox hides what these paths were,
		// not what commands may make them lead to later.
		cfg.Resolved, ledToSystem, err = sandbox.ResolveHideNoting(cfg.Hide, w.dir)
	}
	if err == nil {
		var temps []sandbox.HiddenPath
		temps, err = w.hiddenTemps(cfg.Resolved)
		cfg.Resolved = append(cfg.Resolved, temps...)
	}
	if err != nil {
		return fmt.Errorf("workspace options: %w", err)
	}
	for _, l := range ledToSystem {
		w.log.Warn("workspace: a path to hide leads through a link in the workspace into a system directory, "+
			"where no sandbox hides it (the link may be a command's); name what is there in HidePaths to hide it",
			"entry", l.Entry, "path", l.Path, "leadsTo", l.To, "left", l.Count)
	}
	prot, err := w.probe(cfg)
	switch {
	case err != nil && o.Sandbox == SandboxRequired:
		return fmt.Errorf("%w: %w (Options.Sandbox is SandboxRequired; SandboxAuto runs commands "+
			"unsandboxed where the system cannot sandbox, SandboxOff never sandboxes)", ErrSandboxUnavailable, err)
	case err != nil && errors.Is(err, sandbox.ErrConfig):
		return fmt.Errorf("workspace: set up the sandbox: %w", err)
	case err != nil && !errors.Is(err, sandbox.ErrUnsupported):
		// A failure: never a reason to run commands unsandboxed.
		return fmt.Errorf("workspace: set up the sandbox: %w (Options.Sandbox = SandboxOff runs commands "+
			"without the sandbox)", err)
	case err != nil:
		w.log.Warn("workspace: commands run WITHOUT a sandbox", "reason", err)
		w.prot = prot
		return nil
	case !prot.Complete() && o.Sandbox == SandboxRequired:
		w.releaseWarm()
		return fmt.Errorf("%w: %s", ErrSandboxUnavailable, strings.Join(prot.Missing, "; "))
	case !prot.Complete():
		w.log.Warn("workspace: sandbox protections missing", "missing", strings.Join(prot.Missing, "; "))
	}
	w.prot = prot
	return nil
}

// releaseWarm releases the sandbox New prepared, when New fails.
func (w *Workspace) releaseWarm() {
	if w.warm != nil {
		w.warm.release()
		w.warm = nil
	}
}

// checkShell refuses a shell that the sandbox does not let commands run
// (hidden, or outside the directories Landlock lets them run programs
// from): every command would fail to start.
func (w *Workspace) checkShell() error {
	path, err := filepath.Abs(w.shell)
	if err == nil {
		path, err = filepath.EvalSymlinks(path)
	}
	if err == nil {
		err = w.prot.CheckRunnable(path, w.dir)
	}
	if err != nil {
		return fmt.Errorf("workspace shell %s cannot run in the sandbox: %w; set Options.Shell to one it can run, such as %s",
			w.shell, err, DefaultShell)
	}
	return nil
}

// probes caches the protections sandboxes get, by workspace directory,
// configuration and the lists of package sandbox a program may change
// (what a sandbox hides and lets commands read depends on them): what
// the kernel allows does not change while the process runs, but what a
// sandbox hides depends on where the workspace is.
var probes sync.Map // string (directory, NUL, JSON of the config and the lists) -> Protections

// probe learns which protections cfg gets: from an earlier workspace
// on the same directory with the same configuration (and lists of
// package sandbox), or by setting up a
// sandbox, which is then kept for the first command. It sets w.sandbox
// when there is one.
func (w *Workspace) probe(cfg sandbox.Config) (Protections, error) {
	cfgJSON, err := json.Marshal([]any{cfg, sandbox.DefaultHidden, sandbox.ReadableDirs, sandbox.EtcLinkDirs, sandbox.KeptWithNetwork})
	if err != nil {
		return Protections{}, err
	}
	key := w.dir + "\x00" + string(cfgJSON)
	if p, ok := probes.Load(key); ok {
		w.sandbox = &cfg
		return p.(Protections), nil
	}
	w.sandbox = &cfg
	// New has no context: Options.SetupTimeout bounds the set-up.
	ctx, cancel := context.WithTimeout(context.Background(), w.opts.SetupTimeout)
	defer cancel()
	h, err := w.prepare(ctx)
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("the sandbox set up to learn the protections was not ready within Options.SetupTimeout (%s), and was stopped: %w",
			w.opts.SetupTimeout, ctx.Err())
	}
	if err != nil {
		w.sandbox = nil
		return Protections{Missing: []string{err.Error()}}, err
	}
	prot := *h.sb.Protections()
	probes.Store(key, prot)
	w.warm = h
	return prot, nil
}

// Protections says which protections are in force for this workspace's
// commands. Its zero value (Sandbox false) means none: see Missing for
// why. Its LinkTargets are those known now ([Workspace.LinkTargets]).
func (w *Workspace) Protections() Protections {
	p := w.prot
	p.LinkTargets = w.LinkTargets()
	return p
}

// LinkTargets returns the places in the workspace that commands'
// sandboxes hide because a link at a path to hide led there (see
// [Options.HidePaths] and [sandbox.LinkTargets]), sorted: kept for the
// workspace directory by the process, whichever Workspace on it found
// them. No command can make them visible again; a directory of the
// workspace among them looks empty to commands. It is nil without a
// sandbox.
func (w *Workspace) LinkTargets() []string {
	if w.sandbox == nil {
		return nil
	}
	return w.sandbox.LinkTargets.Paths()
}

// ForgetLinkTargets drops the named places from [Workspace.LinkTargets],
// for every Workspace on this directory: the next commands see them
// again, unless a link at a path to hide leads there anew (a sandbox
// prepared before is not used). Call it only once the host knows that
// no secret was written through a link to them (a program that wrote
// a file to hide while a command's link stood at its name wrote it
// there): that is why they are hidden.
func (w *Workspace) ForgetLinkTargets(places ...string) {
	if w.sandbox != nil {
		w.sandbox.LinkTargets.Forget(places...)
	}
}

// systemDirs are refused as workspace roots unless AllowSystemRoot.
var systemDirs = []string{"/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64",
	"/libx32", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var",
	"/usr/bin", "/usr/lib", "/usr/local", "/usr/sbin", "/usr/share", "/var/lib", "/var/tmp",
	"/System", "/Library", "/Applications", "/Users", "/private", "/private/tmp", "/private/var"}

// systemTrees are refused as workspace roots, with everything beneath
// them, unless AllowSystemRoot: the system's configuration, programs,
// libraries and kernel interfaces. /usr is one, except /usr/local and
// /usr/src, where people keep their own work (but not
// /usr/local's programs and libraries). The home, temporary and data
// directories are refused only themselves.
var systemTrees = []string{"/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32",
	"/proc", "/sbin", "/sys", "/usr", "/usr/local/bin", "/usr/local/etc", "/usr/local/lib",
	"/usr/local/sbin", "/usr/local/share", "/System", "/private/etc"}

// systemTreeExceptions are beneath a system tree but not refused.
var systemTreeExceptions = []string{"/usr/local", "/usr/src"}

// isSystemDir reports whether dir (absolute, clean) is the root of a
// file system ("/", or on Windows a drive or share like C:\), one of
// systemDirs, or beneath one of systemTrees (and not beneath one of
// their exceptions unless in a system tree beneath that).
func isSystemDir(dir string) bool {
	if filepath.Dir(dir) == dir || slices.Contains(systemDirs, dir) {
		return true
	}
	deepest := ""
	for _, t := range systemTrees {
		if within(dir, t) && len(t) > len(deepest) {
			deepest = t
		}
	}
	if deepest == "" {
		return false
	}
	for _, e := range systemTreeExceptions {
		if within(dir, e) && len(e) > len(deepest) {
			return false
		}
	}
	return true
}

// within reports whether dir is tree or beneath it (both clean).
func within(dir, tree string) bool {
	return dir == tree || strings.HasPrefix(dir, tree) && dir[len(tree)] == '/'
}

// fillDefaults validates o and replaces zero fields with defaults.
func (o *Options) fillDefaults() error {
	if o.AllowedExtensions != nil {
		if len(o.AllowedExtensions) == 0 {
			return errors.New("AllowedExtensions is empty; use nil to allow any extension")
		}
		exts := make([]string, len(o.AllowedExtensions))
		for i, e := range o.AllowedExtensions {
			if len(e) < 2 || e[0] != '.' || strings.ContainsAny(e[1:], "./\\\x00") {
				return fmt.Errorf("AllowedExtensions[%d] = %q: want a dot and a name, like \".md\"", i, e)
			}
			exts[i] = e
		}
		o.AllowedExtensions = exts
	}
	if o.MaxReadBytes < 0 || o.MaxListEntries < 0 || o.MaxOutputBytes < 0 || o.MaxWriteBytes < 0 {
		return errors.New("MaxReadBytes, MaxListEntries, MaxOutputBytes and MaxWriteBytes must not be negative")
	}
	if o.Sandbox < SandboxAuto || o.Sandbox > SandboxOff {
		return fmt.Errorf("Sandbox = %d is not a SandboxMode", o.Sandbox)
	}
	if o.MaxWriteBytes == 0 {
		o.MaxWriteBytes = DefaultMaxWriteBytes
	}
	o.HidePaths = slices.Clone(o.HidePaths)
	if o.CommandTimeout < 0 || o.KillGrace < 0 || o.WaitDelay < 0 || o.SetupTimeout < 0 {
		return errors.New("CommandTimeout, KillGrace, WaitDelay and SetupTimeout must not be negative")
	}
	if o.MaxReadBytes == 0 {
		o.MaxReadBytes = DefaultMaxReadBytes
	}
	if o.MaxListEntries == 0 {
		o.MaxListEntries = DefaultMaxListEntries
	}
	if o.CommandTimeout == 0 {
		o.CommandTimeout = DefaultCommandTimeout
	}
	if o.SetupTimeout == 0 {
		o.SetupTimeout = DefaultSetupTimeout
	}
	if o.MaxOutputBytes == 0 {
		o.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if o.KillGrace == 0 {
		o.KillGrace = DefaultKillGrace
	}
	if o.WaitDelay == 0 {
		o.WaitDelay = DefaultWaitDelay
	}
	if o.InheritEnv == nil {
		o.InheritEnv = DefaultInheritEnv
	}
	names := make([]string, len(o.InheritEnv))
	for i, n := range o.InheritEnv {
		if n == "" || strings.ContainsAny(n, "=\x00") {
			return fmt.Errorf("InheritEnv[%d] = %q: not a variable name", i, n)
		}
		names[i] = n
	}
	o.InheritEnv = names
	if o.Shell == "" {
		o.Shell = DefaultShell
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// buildEnv returns the environment for commands: the inherited variables
// that are set, HOME set to dir, and PATH defaulted.
func buildEnv(names []string, dir string) []string {
	env := make([]string, 0, len(names)+2)
	hasPath := false
	for _, n := range names {
		if n == "HOME" {
			continue
		}
		if v, ok := os.LookupEnv(n); ok {
			env = append(env, n+"="+v)
			hasPath = hasPath || n == "PATH"
		}
	}
	if !hasPath {
		env = append(env, "PATH="+defaultPath)
	}
	return append(env, "HOME="+dir)
}

// sandboxTMPDIR is env for sandboxed commands: an inherited TMPDIR that
// leads neither to /tmp nor beneath the workspace dir, which are
// writable in the sandbox, becomes /tmp; elsewhere temporary files could
// not be made (the file system is read-only, and the sandbox's /tmp is
// its own, empty but for the way to a workspace in it).
func sandboxTMPDIR(env []string, dir string) []string {
	for i, kv := range env {
		v, ok := strings.CutPrefix(kv, "TMPDIR=")
		if !ok {
			continue
		}
		if c := filepath.Clean(v); filepath.IsAbs(v) && (c == "/tmp" || within(c, dir) || within(c, "/tmp") && within(dir, c)) {
			continue
		}
		env = slices.Clone(env)
		env[i] = "TMPDIR=/tmp"
		return env
	}
	return env
}

// Dir returns the absolute workspace directory.
func (w *Workspace) Dir() string { return w.dir }

// enter registers an in-flight call; it fails once Close has begun or ctx
// is already done. Every successful enter is paired with w.calls.Done.
func (w *Workspace) enter(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.shut {
		return fmt.Errorf("%s: %w", op, ErrClosed)
	}
	w.calls.Add(1)
	return nil
}

// Close stops the workspace: running commands are killed, and the
// sandboxes being set up for commands are given up (their helpers
// killed); the calls of both return ErrClosed. Close waits for every
// in-flight call to return, then closes the root. It is idempotent; every call blocks until the first has
// finished and returns its error.
func (w *Workspace) Close() error {
	w.once.Do(func() {
		w.mu.Lock()
		w.shut = true
		w.closeNow()
		w.mu.Unlock()
		w.calls.Wait()
		w.warmMu.Lock()
		h := w.warm
		w.warm = nil
		w.warmMu.Unlock()
		if h != nil {
			h.release()
		}
		w.warmers.Wait() // a preparation under way releases its sandbox itself
		w.reapers.Wait()
		w.rootDir.Close()
		w.closeBook()
		if w.hideLock != nil {
			w.hideLock.Close() // unlocked: no command runs, no write is under way
		}
		if w.devNull != nil {
			w.devNull.Close()
		}
		if err := w.root.Close(); err != nil {
			w.closeErr = fmt.Errorf("close workspace root: %w", err)
		}
	})
	return w.closeErr
}
