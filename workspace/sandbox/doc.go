// Package sandbox runs a workspace command in a sandbox of its own: new
// user, PID, mount, network, IPC and UTS namespaces, a fresh /proc, the
// file system read-only except the workspace and a private /tmp and
// /dev/shm, Landlock, a seccomp filter, resource limits, only
// descriptors 0–2, and a first process that is PID 1 of the namespace
// and dies with the host.
//
// # The helper
//
// The sandbox's first process is the host binary itself, started again
// from /proc/self/exe with a marker in argv[0] and the environment. This
// package's init function recognises the marker and runs the helper
// instead of the program: any program that imports package workspace
// (which imports this package) can sandbox its commands, with nothing to
// install. The helper
//
//   - is PID 1 of new user, PID, mount, IPC, UTS and (unless the network
//     is allowed) network namespaces, mapped to the host's user, and
//     exits, killing the namespace, when its control pipe from the host
//     ends: the host let it go or died (a parent-death signal would fire
//     when the host's thread that forked it ends, which any goroutine
//     that locks its thread and returns can cause);
//   - makes every mount private and read-only (and nosuid), mounts a
//     fresh /proc, a private tmpfs on /tmp, a /dev of its own (the
//     null, zero, full and random devices, its own pseudo-terminals and
//     a private tmpfs on /dev/shm), covers the hidden paths
//     ([DefaultHidden], the workspace's [Surroundings], the configured
//     ones; one that holds the workspace keeps the way to it, and, with
//     the network allowed, /run keeps the name resolver's configuration:
//     [KeptWithNetwork]; the directories of the workspace on the way to
//     a hidden path in it are made mount points, which commands cannot
//     rename: see [HiddenPath]),
//     and mounts a copy of the workspace directory — the very directory
//     the file tools opened, checked by device and inode — read-write at
//     its own path;
//   - sets the namespace's pid_max to bound the number of processes;
//   - on the thread it forks from: sets no_new_privs, enters a Landlock
//     domain (read and execute only beneath [ReadableDirs], where the
//     links directly in /etc lead (see ReadableDirs), the workspace,
//     /tmp and /dev/shm, write only beneath the
//     workspace, /tmp and /dev/shm, no TCP unless the network is allowed, no
//     signals or abstract sockets out of the domain, no Unix socket
//     made outside it reached by its path (ABI 9), no mounts),
//     empties the capability bounding set, joins a new, empty session
//     keyring, and installs a seccomp filter that refuses (EPERM)
//     sockets other than TCP/IP ones unless the network is allowed
//     (a named Unix socket of the host is otherwise reachable through
//     any path the sandbox sees; socketpair stays allowed for stream
//     and sequenced-packet pairs, not datagram ones, which can send to
//     a path), new namespaces (unshare and clone with a CLONE_NEW*
//     flag: each user namespace counts against the host user's quota,
//     and gives back every capability inside it; clone3 fails with
//     ENOSYS, so the C library falls back to clone), io_uring, the key
//     system calls, and set-user-ID or set-group-ID modes in chmod and
//     file creation (openat2 fails with ENOSYS, so the C library falls
//     back to openat);
//   - reports that it is ready, and waits for its one command: a
//     sandbox can be set up ahead of the call that uses it ([Prepare],
//     [Process.Run], which refuses when a path to hide appeared or was
//     replaced meanwhile, or is no longer covered, or the host forgot
//     places links led to, or a link of [EtcLinkDirs] leads elsewhere:
//     [ErrPreparedStale]);
//   - forks `shell -c command` with its rlimits (address space, file
//     size, processes, CPU time, open files; no core files) in force from its first
//     instruction, and descriptors 0–2 only: the helper sets the limits
//     on itself while it sets up, before it reports ready, when the
//     address-space limit leaves its Go runtime room (the default
//     does), and otherwise forks the shell stopped at its exec
//     (ptrace), sets them on it and lets it go;
//   - reaps every process re-parented to it; when the shell exits it
//     kills every other process of the namespace, reaps them, and
//     reports the shell's status on a pipe that it then closes: the
//     pipe's end tells the host the command is over and everything it
//     ran is dead, so what it wrote is all in the output pipes (which
//     the helper holds until it exits, so the host does not wait for
//     their end), before the helper's own exit, which the namespaces'
//     teardown makes slow.
//
// Because the helper is PID 1, its death kills every process of the
// namespace, including those that called setsid or double-forked. The
// host kills it to stop a command, and it kills itself when the host
// dies (its control pipe ends). A command cannot kill it: PID 1 gets no
// signal from inside its namespace that it does not handle, and it
// catches and drops every one it could get, those that mean a crash
// (SIGSEGV, SIGABRT, …) included: sent by kill they are ordinary
// signals. Its runtime prints no stack trace (GOTRACEBACK=none) into
// the command's stderr should it fail.
//
// # What the covers do not hide
//
// A cover is on a name, for as long as that name holds its file. A file
// to hide in the workspace with another hard link would be shown by
// its other name: the set-up refuses it, and Run's check one linked
// since ([ErrHiddenLinked]). A file to hide replaced from outside the
// sandbox while its command runs (renamed over, as editors save, or
// removed and made again) is shown to that command: the kernel
// detaches a mount, in every namespace, when its mount point is renamed
// over or removed, and neither a mount (one on the directory would
// hide its other entries) nor Landlock (which grants access beneath
// the workspace, without exceptions) keeps the new file hidden. Later
// set-ups refuse ([ErrHiddenMoved]). A host changes a path to hide
// while no command runs (package workspace's write_file refuses while
// one does, and an exclusive flock(2) on the workspace's root waits
// for them), or writes it in place, which keeps the file and its
// cover.
//
// # What the limits do not bound
//
// RLIMIT_AS bounds each process's mappings, not the kernel's memory
// that a command can make the kernel hold for it: pipe and socket
// buffers, memfd, /tmp and /dev/shm pages beyond their own limits, page
// tables, and the like. /tmp and /dev/shm are each bounded in size and
// in files (one per page of its size), open files per process by RLIMIT_NOFILE, processes by
// pid_max, but nothing bounds the sum: that takes a cgroup, which the
// sandbox does not set up. A host that runs untrusted commands should
// run its program in a cgroup (v2) with a memory limit.
//
// # Degrading
//
// [Probe] says which protections a host gets, in one [Protections]
// value; [Protections.Missing] names each one that is not in force and
// why. On systems other than Linux there is no sandbox ([Supported] is
// false) and Probe says so. On Linux only creating the namespaces and
// the first mount in them and the fresh /proc (which the kernel refuses
// where the host's /proc has masked parts, as in most containers) decide
// that the system cannot sandbox ([ErrUnsupported]); a later step the system refuses is done without
// and named in Missing when the rest still confines the command (the
// read-only root, pid_max, Landlock, the new session keyring, the
// seccomp filter, pseudo-terminals), and otherwise fails the set-up
// with an error naming the step (the workspace's mount, /tmp,
// /dev, no_new_privs, the capability bounding set). Whether the system
// supports the sandbox is decided by what it has, never by a resource running out: a sandbox that
// cannot be set up for want of memory, processes or the user's quota of
// namespaces fails with [ErrResources], not [ErrUnsupported], so that
// exhausting a quota cannot make commands run unsandboxed.
package sandbox
