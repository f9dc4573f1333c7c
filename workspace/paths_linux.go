//go:build linux

package workspace

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// kernelNames says that fdPath works here: Linux names an open file in
// /proc/self/fd.
const kernelNames = true

// fdPath returns the path the kernel has for an open file (in
// /proc/self/fd). It fails for a file that has been deleted. Its errors
// do not show the path: that is a host path, which the model is not shown.
func fdPath(f *os.File) (string, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return "", err
	}
	var p string
	var rerr error
	if err := rc.Control(func(fd uintptr) {
		p, rerr = os.Readlink("/proc/self/fd/" + strconv.FormatUint(uint64(fd), 10))
	}); err != nil {
		return "", err
	}
	if rerr != nil {
		return "", rerr
	}
	if strings.HasSuffix(p, " (deleted)") {
		return "", errDeleted
	}
	if !filepath.IsAbs(p) {
		return "", errNoPath
	}
	return p, nil
}

// dirByName returns a name of the directory that upTo (a path with a
// ".." or a final ".", checked by checkName) leads to beneath the root,
// when no symbolic link is on the way: the name it reads as once
// cleaned ("sub/deep/.." is "sub"), found to be that very directory.
// The kernel resolves upTo, and then the cleaned name, from the root's
// descriptor (openat2, beneath it and following no link), and the two
// must be one directory (device and inode): then a ".." in upTo was the
// parent of a directory, as cleaning takes it. ok is false otherwise
// (a link on the way, a name that is not a directory or does not
// exist, a change meanwhile, openat2 refused or raced by renames more
// than maxOpenat2Tries times), and the caller resolves upTo through the
// root and asks the kernel for the name of what it opened, which costs
// two readlinks of /proc and more opens than this.
func (w *Workspace) dirByName(upTo string) (name string, ok bool) {
	name = filepath.Clean(upTo)
	if !filepath.IsLocal(name) {
		return "", false
	}
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: noLinksBeneath}
	_ = w.fromRoot(func(root int) error {
		var a, b unix.Stat_t
		if w.sys.statBeneath(root, upTo, &how, &a) != nil {
			return nil
		}
		if w.hookBeforeName != nil {
			w.hookBeforeName()
		}
		ok = w.sys.statBeneath(root, name, &how, &b) == nil && a.Dev == b.Dev && a.Ino == b.Ino
		return nil
	})
	return name, ok
}

// noLinksBeneath resolves a path beneath the directory it starts from,
// following no symbolic link.
const noLinksBeneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// fromRoot calls fn with the root directory's descriptor, and returns
// its error.
func (w *Workspace) fromRoot(fn func(root int) error) error {
	rc, err := w.rootDir.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(root uintptr) { ferr = fn(int(root)) }); err != nil {
		return err
	}
	return ferr
}

// entryBeneath returns the identity of the entry name (relative to the
// root, cleaned) names, looked up from the root's descriptor following
// no symbolic link, not even its last component (a link is an entry of
// its own): what a command's link leads to, in the workspace or out of
// it, is not looked at. It fails with ENOENT when nothing is there, and
// with ELOOP or ENOTDIR when a link or a file is on the way.
func (w *Workspace) entryBeneath(name string) (entryID, error) {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: noLinksBeneath}
	var id entryID
	err := w.fromRoot(func(root int) error {
		fd, err := w.sys.openBeneath(root, name, &how)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		id, err = idOf(fd)
		return err
	})
	return id, err
}

// idOf is the identity of the file fd refers to (O_PATH will do), with
// its birth when the file system gives it (see sandbox.HiddenPath.Birth).
func idOf(fd int) (entryID, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return entryID{}, err
	}
	id := entryID{dev: st.Dev, ino: st.Ino}
	var stx unix.Statx_t
	err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME, &stx)
	if err == nil && stx.Mask&unix.STATX_BTIME != 0 {
		id.birth = stx.Btime.Sec*1e9 + int64(stx.Btime.Nsec)
	}
	return id, nil
}

// namesBeneath returns the names in the directory dir (relative to the
// root, cleaned), reached as entryBeneath reaches an entry.
func (w *Workspace) namesBeneath(dir string) ([]string, error) {
	how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NONBLOCK | unix.O_CLOEXEC, Resolve: noLinksBeneath}
	fd := -1
	err := w.fromRoot(func(root int) (err error) {
		fd, err = w.sys.openBeneath(root, dir, &how)
		return err
	})
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	return f.Readdirnames(-1)
}

// maxOpenat2Tries bounds the calls openBeneath makes to openat2 for
// one path. The kernel answers EAGAIN to a ".." under RESOLVE_BENEATH
// when a rename anywhere on the system raced the walk; on a system that
// renames without pause every try could meet one, so after a few the
// path is left to the root, which resolves it as well, only slower.
const maxOpenat2Tries = 8

// sysCalls are the system calls of the file tools that tests replace
// (openat2, to answer EAGAIN), held by each Workspace so that a test
// replacing one affects its own workspace only, and tests run in
// parallel. A nil field is the system's call.
type sysCalls struct {
	openat2 func(dirfd int, path string, how *unix.OpenHow) (int, error)
}

// openBeneath opens path from the directory root as how says. An open
// interrupted (EINTR) or raced by a rename (EAGAIN) is tried again,
// maxOpenat2Tries times in all.
func (s *sysCalls) openBeneath(root int, path string, how *unix.OpenHow) (int, error) {
	openat2 := s.openat2
	if openat2 == nil {
		openat2 = unix.Openat2
	}
	var fd int
	var err error
	for range maxOpenat2Tries {
		if fd, err = openat2(root, path, how); err != unix.EINTR && err != unix.EAGAIN {
			break
		}
	}
	return fd, err
}

// statBeneath opens path as openBeneath does and fstats what it opened
// into st.
func (s *sysCalls) statBeneath(root int, path string, how *unix.OpenHow, st *unix.Stat_t) error {
	fd, err := s.openBeneath(root, path, how)
	if err != nil {
		return err
	}
	err = unix.Fstat(fd, st)
	unix.Close(fd)
	return err
}
