//go:build linux

package workspace

import (
	"errors"

	"golang.org/x/sys/unix"
)

// hideLockFd is the descriptor of the workspace's root that carries its
// share of the lock that keeps commands and writes of the paths hidden
// from commands apart across every workspace open on the directory (see
// tryLockHideShared), opened the first time it is needed; -1 when it
// could not be, and nothing is locked. w.hideMu held.
func (w *Workspace) hideLockFd() int {
	if w.hideLock == nil {
		f, err := w.root.Open(".") // O_CLOEXEC; never handed to a helper
		if err != nil {
			w.log.Debug("workspace: no lock shared with the workspaces open on the directory", "err", err)
			return -1
		}
		w.hideLock = f
	}
	return int(w.hideLock.Fd())
}

// tryLockHideShared takes a shared flock(2) on the workspace's root,
// without waiting, as the first sandboxed command of the workspace
// begins (see commandBegins): false while another holds it exclusive, a
// workspace open on the directory (of this process or another) writing
// a path hidden from commands, or a program of the host; unlockHide
// releases it as the last command ends. A write of a hidden path takes
// the lock exclusive, without waiting (lockHideExclusive), and is
// refused while a command of any of them runs. The lock is the open
// file's, and a helper forked meanwhile holds a copy of the descriptor
// until it execs: it is released explicitly, never by closing the
// descriptor. A file system that has no such locks leaves each
// workspace to its own count (true). w.hideMu held.
func (w *Workspace) tryLockHideShared() bool {
	fd := w.hideLockFd()
	if fd < 0 {
		return true
	}
	err := noEINTR(func() error { return unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB) })
	switch {
	case err == nil:
		return true
	case errors.Is(err, unix.EWOULDBLOCK):
		return false
	}
	w.log.Debug("workspace: no shared lock on the root for a command", "err", err)
	return true
}

// lockHideExclusive takes the lock on the workspace's root exclusive for
// a write of a path hidden from commands (see tryLockHideShared): it is
// refused (ReasonHiddenInUse) while a workspace open on the directory,
// of this process or another, runs a command, or another process writes
// such a path there. w.hideMu and hiddenTempMu held, and no command of
// the workspace under way.
func (w *Workspace) lockHideExclusive() *refusal {
	fd := w.hideLockFd()
	if fd < 0 {
		return nil
	}
	return w.lockExclusive(fd, hiddenSharedInUseDetail, "workspace: no exclusive lock on the root for a write of a hidden path")
}

// unlockHide releases what tryLockHideShared or lockHideExclusive took.
// w.hideMu held.
func (w *Workspace) unlockHide() {
	if w.hideLock != nil {
		fd := int(w.hideLock.Fd())
		_ = noEINTR(func() error { return unix.Flock(fd, unix.LOCK_UN) })
	}
}
