// Package workspace implements the seed's built-in workspace tools,
// read_file, write_file and run_command, as a plain Go API confined to one
// directory. It has no actors and no frames: a tool binding wraps the
// three methods of [Workspace] and infers their JSON schemas from
// [ReadFileInput], [WriteFileInput] and [RunCommandInput].
//
// # Files
//
// Every file access goes through an [os.Root] opened on the workspace
// root, so a name, a symbolic link or a rename racing with the call can
// never reach outside it. Before that, names are checked so that refusals
// say why: absolute paths, ".." escapes, NUL bytes, backslashes, percent
// escapes and over-long names each get their own [Reason]. A "." or ".."
// in a path is resolved as the kernel resolves it: after a name that is
// not a directory it is refused ("notes.txt/." and "notes.txt/.." name
// nothing), and a ".." after a link to a directory is that directory's
// parent, not the parent of the link. Symbolic links
// are followed only inside the root, and the name a link resolves to must
// pass the extension allow-list too. Only regular files with a single
// hard link are read or written; FIFOs, devices and sockets are opened
// non-blocking and refused after fstat.
//
// Reads return at most [Options.MaxReadBytes], marked truncated when cut,
// and either valid UTF-8 text or binary:true without content. An empty
// path lists the root as "." does (its path is "." in the result, never
// the host's path), a directory path lists that directory; listings are
// sorted and bounded by [Options.MaxListEntries]. A name that is not
// UTF-8 is shown with U+FFFD in place of its invalid bytes, which names
// no file; the listing's hint then says to rename it with run_command.
// Writes are atomic: a temporary file in the target's directory is
// written, synced and renamed over the target, and the directory is
// synced; missing parents are created inside the root, and a failed write
// leaves the old content as it was. The temporary file of a write of a
// path hidden from commands has a name of its own in each directory
// (".polyweave-write-~hidden.tmp"), which every sandbox hides there,
// the file tools refuse and listings leave out: what a crash leaves
// under it is seen by no command, and is removed by the next such write
// there or when the workspace is opened again.
//
// A path hidden from commands is not written (write_file, undo) while a
// sandboxed command runs, which would see it: the write is refused
// (ReasonHiddenInUse), and goes through once no command runs. The rule
// holds across every workspace open on one directory, in the process or
// in others (several sessions, or agents, on one folder): a command
// holds a shared flock(2) on the workspace's root from before it starts
// until every process of its sandbox is gone, and a write of a hidden
// path takes it exclusive, without waiting, for as long as it writes;
// a command starting meanwhile waits for the write, within its timeout
// (Options.CommandTimeout), which answers it, never run, when the lock
// stays held elsewhere (a program of the host): ReasonRootLocked. A
// write refused for the lock says what may hold it. Workspaces open on
// a folder and on a folder within it share no such lock, and a file
// system without flock leaves each workspace to its own commands.
//
// A program of the host's that replaces a path to hide (renames a new
// file over it, as editors save) while a command runs shows the new
// file to that command, the kernel taking the cover off with the old
// file, and the commands after it are refused as after a move: it
// should write with write_file, or take the same lock exclusive while
// it writes (flock -x on the workspace's root waits for the commands).
// A file to hide with another hard link (ln .env notes.txt) would be
// read by its other name: no command runs until the host removes the
// link ([sandbox.ErrHiddenLinked]). See [Options.HidePaths].
//
// The messages of read_file and write_file show no host path: not the
// workspace's own (they name files relative to it), nor where a file
// opened inside was moved or what it was when deleted, nor the target of
// an absolute link. A file moved out between its open and the check of
// its name "was moved outside the workspace since it was opened"; a link
// out "is a symbolic link to a place outside the workspace". Commands run
// in the workspace at its own host path (their pwd shows it), so that
// path is not kept from run_command; but what run_command says of a
// command that could not start names no host path either: not a path
// to hide, nor the shell, nor where the workspace directory was. It
// says what happened (a path to hide that cannot be hidden, a shell
// that could not start, with the system's words for why, the resource
// that ran out), and the log ([Options.Logger]) keeps the error with
// its paths.
//
// # Commands
//
// run_command runs `sh -c` in the workspace directory — the very directory
// New resolved and the file tools use — with stdin from /dev/null and an
// environment built from an allow-list ([Options.InheritEnv]; HOME is the
// workspace). Each output stream keeps [Options.MaxOutputBytes] and the
// rest is drained and dropped.
//
// By default ([SandboxAuto]) every command runs in a sandbox of its own
// (package [github.com/polyweave/polyweave-go/workspace/sandbox]): new
// user, PID, mount, network, IPC and UTS namespaces under a helper that
// is their PID 1; a fresh /proc; everything read-only but the workspace
// and a private /tmp; nothing visible around the workspace (the directory
// [sandbox.Surroundings] names, its highest ancestor that is not a system
// directory such as /usr or /var, shows only the way to the workspace),
// nor in /root, /home, /etc/shadow and the system's other secrets, nor
// in /run, where the host's daemons keep their Unix sockets (with the
// network allowed, the name resolver's configuration stays:
// [sandbox.KeptWithNetwork]) ([sandbox.DefaultHidden]; [Options.HidePaths]
// hides more; programs installed under /root or /home, such as a
// toolchain in the user's home, are hidden with them, so commands find
// what /usr and /opt hold); Landlock allowing reads only beneath the
// system's directories ([sandbox.ReadableDirs]: /usr, /bin, /lib, /etc,
// /opt, /proc, /dev, …), the workspace and /tmp, so that no other file
// the host's user may read (in /var, /srv, /mnt, …; every root-only
// file there when the host runs as root) is readable, writes only
// beneath the workspace and /tmp, no signal nor abstract Unix socket
// out of the sandbox, and no TCP; no network unless
// [Options.AllowNetwork], and without it no Unix, netlink or other
// non-TCP/IP sockets either (a seccomp filter; socketpair works; with
// the network allowed, so do the host's Unix sockets named by a path
// the sandbox shows, outside /run, until Landlock ABI 9, which refuses
// every Unix socket made outside the sandbox); no keyrings, no
// io_uring, no set-user-ID or set-group-ID files; no capabilities;
// rlimits on address space, file size, processes and CPU time
// ([Options.Limits]); only descriptors 0–2. When the shell exits, at the
// timeout, on cancellation or Close, and when the host process dies (the
// helper's control pipe from the host ends), the helper dies and the
// kernel kills every process of the namespace, including those that
// called setsid or forked twice.
//
// The limits are rlimits, and an rlimit bounds one process (address
// space, CPU time) or one file (size): a command that starts many
// processes can use that many times the memory and CPU (40 processes of
// 128 MiB each hold 5 GiB under a 128 MiB limit), up to the process
// limit, and write many files. They stop a runaway program, not a
// command bent on exhausting the host: run such commands under a cgroup
// of the host's (systemd-run --scope -p MemoryMax=…) as well.
//
// A configuration the sandbox cannot honour (a hidden path that is "/"
// or the workspace itself, or that cannot be resolved) makes New fail,
// whatever the mode, and so does a sandbox that cannot be set up for
// want of a resource ([sandbox.ErrResources]: the user's quota of
// namespaces used up, ENOMEM, EMFILE, …) or for any other reason:
// commands run unsandboxed under [SandboxAuto] only when the system
// cannot sandbox at all ([sandbox.ErrUnsupported]: the namespaces cannot
// be created, or their root may not mount anything, or not a /proc, as
// in a container whose /proc has masked parts). Once it can, a
// hardening step the system refuses (a container runtime's seccomp
// profile, a security module) either is done without and named in
// Protections.Missing (the read-only root, the process limit by
// pid_max, Landlock, the new session keyring, the seccomp filter,
// pseudo-terminals) or, for a step the sandbox does not hold without
// (the workspace's mount, the private /tmp and /dev,
// no_new_privs, dropping the capabilities), makes New fail naming it.
//
// Setting a sandbox up (starting the helper, namespaces, mounts,
// Landlock) is most of what a sandboxed command costs, so it is done
// ahead: when a command has finished, the workspace prepares the next
// command's sandbox, which then waits for its command; each command
// still gets new namespaces, a new /proc and /tmp of its own. A workspace
// that is idle between commands, as it is while a model thinks, starts
// each in about the time of an unsandboxed one (figure 6 of bench/). So
// a workspace with a sandbox keeps one idle helper process, waiting for
// its command, while it is open; Close ends it.
// The helper of a finished command has killed everything in it before
// the call returns; its own exit, which the kernel slows by tearing the
// namespaces down, is waited for in the background (and by Close).
//
// New sets up a sandbox once to learn which protections the kernel
// allows; [Workspace.Protections] says which are in force, and
// Protections.Missing why any is not. Where there is no sandbox (no user
// namespaces, another OS) commands run unsandboxed and a warning is
// logged; [SandboxRequired] makes New fail instead.
//
// Unsandboxed ([SandboxOff], or no sandbox available) the shell starts in
// a new session and so a new process group, which is killed when the
// shell exits, and at the timeout or on cancellation (SIGTERM, then
// SIGKILL after [Options.KillGrace]). That confines lifetimes, not
// access. The hostile command suite (hostile_test.go) runs every case
// both ways, each checked through /proc and the file system rather than
// the tool's word; these are the cases only the sandbox stops:
//
//	case                              without the sandbox
//	setsid / setsid -f daemon         a process survives the call
//	setpgid (perl setpgrp) daemon     a process survives the call
//	bash -c 'set -m; … &' daemon      a process survives the call
//	kill -9 $PPID                     the host is killed
//	cat /proc/$PPID/environ           the host's environment is read
//	cd .. and write, cat ../secret    files outside are written and read
//	absolute-path write and read      files outside are written and read
//	  (the sandbox shows no file beside the workspace, nor beside the
//	  directories on the way to it below the first system directory)
//	unshare -m; mount --bind outside  files outside are written and read
//	network connect (127.0.0.1)       the network is reached
//	descriptor left open by the host  a descriptor of the host is read
//	fork bomb (400 processes)         400 processes start
//	memory bomb (one 300 MB process)  300 MB are allocated
//	  (the limit is per process: see the limits above)
//	disk bomb (50 MB file)            a 50 MB file is written
//	chmod 4755 on a copy of sh        a set-user-ID file is left
//	CPU spin                          it spins until the timeout
//	host killed (kill -9) mid-command the command runs on and finishes
//
// Both ways stop a double-forked daemon that stays in the group, 50 MB of
// output (capped, drained) and reads from stdin (empty).
//
// A result says what cut a command short ([RunCommandResult.StoppedBy]:
// timeout, cancellation, Close, the CPU, file size, memory or process
// limit, a failed sandbox), with the exit code and the signal, and
// whether it ran sandboxed. The CPU and file size limits kill with their
// own signals (SIGXCPU, SIGXFSZ). The memory and process limits make an
// allocation or a fork fail and the program decides what follows, and
// the kernel does not say which process hit them; so a sandboxed command
// that exits non-zero saying it ran out of memory (on stderr: "Out of
// memory", "Cannot allocate memory", MemoryError, std::bad_alloc, …) or
// could not fork ("Resource temporarily unavailable", "Cannot fork") is
// reported as stopped by that limit.
//
// # Platform
//
// The package builds on Linux, the other Unix systems and Windows; the
// sandbox and the pidfd that watches the shell are Linux's (5.3 or
// later; the sandbox needs user namespaces and uses Landlock where the
// kernel has it, and a per-namespace pid_max, Linux 6.14, to bound
// processes when the host runs as root). Elsewhere commands run
// unsandboxed and Protections says "no sandbox". On Unix systems output
// pipes are drained with one poll(2) loop in the calling goroutine. The
// name an open file resolves to, which read_file checks against
// [Options.AllowedExtensions] and write_file through a symbolic link
// writes to, comes from the kernel on Linux (/proc/self/fd) and Windows
// (GetFinalPathNameByHandle). The other Unix systems have no such name:
// there the path the tool opened is resolved again through the root, one
// component and one symbolic link at a time, and the name found must be
// the very file opened (the same device and inode), or the call is
// refused with [ReasonIO], as when the path was changed in between. That
// name is spelled as the path and its links spell it, which on a
// case-insensitive file system (macOS's, by default) may differ in case
// from the name on disk; the allow-list ignores case.
//
// On Windows the shell is [Options.Shell] too, so it must name a POSIX
// shell that takes -c (sh.exe of Git for Windows or MSYS2, say; the
// default /bin/sh is not found there and New fails saying so). It starts
// suspended, is put into a job object of its own and then resumed, so
// every process it starts is in the job, and none can leave it; the job
// is killed when the shell exits, at the timeout, on cancellation and on
// Close, and the system kills it with the host process (the job is
// closed with the host's last handle to it). There is no SIGTERM there:
// a command is killed at once, [Options.KillGrace] does not apply, and
// the exit code of a killed command is 1, with no signal. Each output
// pipe is read by a goroutine of its own. The file tools confine access
// the same way (os.Root), but a file's number of hard links is not known
// from its FileInfo there, so a hard link is not refused.
//
// # Results and errors
//
// A tool failure (a refused path, a missing file, an empty command) is a
// result with Success false, an Error naming the path and the reason, and
// a [Reason] for Go callers; the Go error is reserved for the
// infrastructure: a context done before the call (or during a command)
// and a closed workspace ([ErrClosed]). Results marshal to the seed's JSON
// shapes, with this package's additions (truncated, binary, timedOut, …)
// present only when set, and without HTML escapes.
//
// Bound as tools ([Tools]), an unsuccessful result is also an error
// result of the call (the frame's IsError and failure kind, see package
// tools), with the same JSON for the model: kind not_found for a path
// that names no file (a missing file, a link to one), invalid_arguments
// for a call that asked what cannot be done (a refused path, an empty
// command), neither of which counts against the tool's circuit breaker,
// unavailable for a command that never ran because its sandbox was not
// set up within the command's timeout, or it or its sandbox could not
// be started for want of a resource (descriptors for its output, say;
// its message says which), which does not count either (its message says so,
// and to try again: the kind is also that of a call an open breaker
// refuses, whose message says to answer without the tool), and handler_error when
// the workspace failed (a file system error, the directory gone, a shell
// that could not start). A command that ran is a
// successful result whatever its exit code, and one that timed out too:
// the model reads what it did.
package workspace
