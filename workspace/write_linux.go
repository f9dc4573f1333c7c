//go:build linux

package workspace

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// replaceBeneath is replace on Linux: the target's directory is opened
// once from the root's descriptor, beneath it and following no link
// (openat2), and the temporary file is created, renamed over the target
// and the directory synced through that descriptor. Between the check
// of the name and the write, a command may swap a directory on the way
// for a symbolic link (cfg -> pub, for cfg/.env to hide): the root
// would follow it, within the workspace, and the content of a path to
// hide would land where the link leads, a name commands see. Reached
// this way, no link is followed after the directory is opened; folders
// missing on the way are created so too (mkdirBeneath).
//
// A link on the way to a target that is a path to hide is refused
// (ReasonLinkToHidden), as the check refuses one it sees. done is false
// when the directory cannot be opened so and the target is not a path
// to hide (a link on the way to it is followed, as everywhere in the
// workspace), or when openat2 is not available (a kernel before 5.6, or
// a seccomp filter refusing it): replace then goes through the root.
func (w *Workspace) replaceBeneath(target string, perm fs.FileMode, exists bool, content string, hidden bool) (done bool, rf *refusal) {
	dir, base := filepath.Dir(target), filepath.Base(target)
	d, err := w.dirBeneath(dir)
	if errors.Is(err, unix.ENOENT) && dir != "." {
		d, err = w.mkdirBeneath(dir)
	}
	if err != nil {
		if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
			return false, nil
		}
		link, ok := w.linkOnTheWay(target)
		if !ok {
			link = dir
		}
		if rf := w.linkedHidden(target, link); rf == nil {
			return false, nil
		} else if errors.Is(err, unix.ELOOP) {
			return true, rf
		}
		return true, classify(&fs.PathError{Op: "open", Path: dir, Err: err})
	}
	defer unix.Close(d)

	tmp := tempName(hidden)
	if hidden {
		if dir != "." { // the root is locked already (hiddenWrite)
			if rf := w.lockTempDir(d, dir); rf != nil {
				return true, rf
			}
			defer unlockTempDir(d)
		}
		// One left by a crash: see hiddenTempName.
		if err := unix.Unlinkat(d, tmp, 0); err != nil && err != unix.ENOENT {
			return true, leftoverRefused(err)
		}
	}
	var fd int
	err = noEINTR(func() (err error) {
		fd, err = unix.Openat(d, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
		return err
	})
	if err != nil {
		return true, classify(&fs.PathError{Op: "open", Path: target, Err: err})
	}
	err = writeSynced(os.NewFile(uintptr(fd), filepath.Join(dir, tmp)), content, perm, exists)
	if err == nil && w.hookCrash != nil && w.hookCrash() {
		return true, refuse(ReasonIO, "stopped before the rename, as by a crash (a test's)")
	}
	if err == nil && w.hookBeforeRename != nil {
		err = w.hookBeforeRename()
	}
	if err == nil {
		if err = noEINTR(func() error { return unix.Renameat(d, tmp, d, base) }); err != nil {
			err = &os.LinkError{Op: "rename", Old: tmp, New: base, Err: err}
		}
	}
	if err != nil {
		if rerr := unix.Unlinkat(d, tmp, 0); rerr != nil && rerr != unix.ENOENT {
			w.log.Warn("write_file: remove temporary file", "path", filepath.Join(dir, tmp), "err", rerr)
		}
		w.log.Debug("write_file: write failed", "target", target, "err", err)
		return true, classifyWrite(err, filepath.Join(dir, tmp), target)
	}
	// As in replace: the rename is done, a failed sync is only logged.
	if err := noEINTR(func() error { return unix.Fsync(d) }); err != nil {
		w.log.Warn("write_file: sync directory", "path", dir, "err", err)
	}
	return true, nil
}

// dirBeneath opens the directory dir (relative to the root, cleaned)
// from the root's descriptor, beneath it and following no link.
func (w *Workspace) dirBeneath(dir string) (int, error) {
	how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: noLinksBeneath}
	fd := -1
	err := w.fromRoot(func(root int) (err error) {
		fd, err = w.sys.openBeneath(root, dir, &how)
		return err
	})
	return fd, err
}

// mkdirBeneath creates the folders of dir (relative to the root,
// cleaned) that are missing and opens it, as dirBeneath does: one
// component at a time from the root's descriptor, following no link,
// so that a link a command makes on the way meanwhile fails it (ELOOP)
// rather than has folders created where the link leads.
func (w *Workspace) mkdirBeneath(dir string) (int, error) {
	how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: noLinksBeneath}
	d, err := w.dirBeneath(".")
	if err != nil {
		return -1, err
	}
	for part := range strings.SplitSeq(dir, "/") {
		next, err := w.sys.openBeneath(d, part, &how)
		if errors.Is(err, unix.ENOENT) {
			err = unix.Mkdirat(d, part, 0o755)
			if err == nil || errors.Is(err, unix.EEXIST) {
				next, err = w.sys.openBeneath(d, part, &how)
			}
		}
		unix.Close(d)
		if err != nil {
			return -1, err
		}
		d = next
	}
	return d, nil
}

// noEINTR calls fn again while it is interrupted by a signal (EINTR), as
// the os package does for its own calls.
func noEINTR(fn func() error) error {
	for {
		if err := fn(); err != unix.EINTR {
			return err
		}
	}
}

// lockTempDir locks the folder d (dir, relative to the root) for a
// write of a path hidden from commands there, or the removal of what
// such a write left (see hiddenTempName): an exclusive flock(2) on the
// descriptor, which another process holding it (its own write there)
// makes refused (ReasonHiddenInUse) rather than waited for: a process
// may hold it for as long as it likes. unlockTempDir releases it, and
// must, before the descriptor is closed: the lock is the open file's,
// and a process the workspace forks meanwhile (a sandbox's helper, set
// up ahead) holds a copy of the descriptor until it execs, which would
// keep the lock held past the close. A file system that has no such
// locks is written unlocked: the writes of the process are one at a
// time all the same (hiddenTempMu).
func (w *Workspace) lockTempDir(d int, dir string) *refusal {
	return w.lockExclusive(d, hiddenTempBusy, "write_file: no lock on the folder of a hidden path's temporary file", "path", dir)
}

// lockExclusive takes an exclusive flock(2) on d without waiting: one
// another holds refuses (ReasonHiddenInUse, busy says why); a file
// system without such locks leaves d unlocked, logged (noLock, args).
func (w *Workspace) lockExclusive(d int, busy, noLock string, args ...any) *refusal {
	err := noEINTR(func() error { return unix.Flock(d, unix.LOCK_EX|unix.LOCK_NB) })
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EWOULDBLOCK):
		return refuse(ReasonHiddenInUse, busy)
	}
	w.log.Debug(noLock, append(args, "err", err)...)
	return nil
}

// lockTempDirOf is lockTempDir of the folder dir (relative to the
// root, cleaned), opened through the root; unlock closes it.
func (w *Workspace) lockTempDirOf(dir string) (unlock func(), rf *refusal) {
	f, err := w.root.Open(dir)
	if err != nil {
		return nil, classify(err)
	}
	rc, err := f.SyscallConn()
	if err == nil {
		err = rc.Control(func(fd uintptr) { rf = w.lockTempDir(int(fd), dir) })
	}
	if err != nil {
		rf = classify(err)
	}
	if rf != nil {
		f.Close()
		return nil, rf
	}
	return func() {
		if rc, err := f.SyscallConn(); err == nil {
			_ = rc.Control(func(fd uintptr) { unlockTempDir(int(fd)) })
		}
		f.Close()
	}, nil
}

// unlockTempDir releases the lock lockTempDir took on d (see there).
func unlockTempDir(d int) {
	_ = noEINTR(func() error { return unix.Flock(d, unix.LOCK_UN) })
}
