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
// escapes and over-long names each get their own [Reason]. Symbolic links
// are followed only inside the root, and the name a link resolves to must
// pass the extension allow-list too. Only regular files with a single
// hard link are read or written; FIFOs, devices and sockets are opened
// non-blocking and refused after fstat.
//
// Reads return at most [Options.MaxReadBytes], marked truncated when cut,
// and either valid UTF-8 text or binary:true without content. An empty
// path lists the root (the seed's listing), a directory path lists that
// directory; listings are sorted and bounded by [Options.MaxListEntries].
// Writes are atomic: a temporary file in the target's directory is
// written, synced and renamed over the target, and the directory is
// synced; missing parents are created inside the root, and a failed write
// leaves the old content as it was.
//
// # Commands
//
// run_command runs `sh -c` in the workspace directory, in a new session
// and so a new process group, with stdin from /dev/null and an environment
// built from an allow-list ([Options.InheritEnv]; HOME is the workspace).
// When the shell exits, and at the timeout or on cancellation (SIGTERM,
// then SIGKILL), the whole process group is killed, so nothing the command
// started in its group outlives the call. Each output stream keeps
// [Options.MaxOutputBytes] and the rest is drained and dropped.
//
// run_command confines process lifetime, not file access: the shell can
// reach whatever the process's user can, and a process that calls setsid
// leaves the group and is not killed (the call still returns, after
// [Options.WaitDelay] at most). Confining commands further needs an OS
// sandbox (namespaces, cgroups), which this package does not set up.
//
// # Platform
//
// The package is for Linux: run_command watches the shell through a pidfd
// (Linux 5.3 or later) and drains both output pipes with one poll(2) loop
// in the calling goroutine, and the extension check on a resolved
// symbolic link reads the open file's name from /proc/self/fd.
//
// # Results and errors
//
// A tool failure (a refused path, a missing file, an empty command) is a
// result with Success false, an Error naming the path and the reason, and
// a [Reason] for Go callers; the Go error is reserved for the
// infrastructure: a context done before the call (or during a command)
// and a closed workspace ([ErrClosed]). Results marshal to the seed's JSON
// shapes, with this package's additions (truncated, binary, timedOut, …)
// present only when set.
package workspace
