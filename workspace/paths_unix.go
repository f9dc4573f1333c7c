//go:build unix

package workspace

import (
	"io/fs"
	"os"
	"syscall"
)

// openFlags opens without blocking on a FIFO or device and without
// acquiring a controlling terminal; the file type is checked after open.
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY

// writeCheckFlags open a file for writing, to learn whether the process
// may, without changing it or blocking.
const writeCheckFlags = os.O_WRONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY

// removed reports whether the open directory d has been removed: it has
// no links left.
func removed(d *os.File) bool {
	fi, err := d.Stat()
	if err != nil {
		return true
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return !ok || st.Nlink == 0
}

// linkCount returns the number of hard links of the file fi describes.
func linkCount(fi fs.FileInfo) (uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Nlink), true
}

// errnoReason is the refusal reason an errno means, if any.
func errnoReason(errno syscall.Errno) (Reason, bool) {
	switch errno {
	case syscall.ENOENT:
		return ReasonNotFound, true
	case syscall.ELOOP:
		return ReasonSymlinkLoop, true
	case syscall.ENOTDIR:
		return ReasonNotDirectory, true
	case syscall.EISDIR:
		return ReasonIsDirectory, true
	case syscall.ENAMETOOLONG:
		return ReasonNameTooLong, true
	case syscall.EACCES, syscall.EPERM:
		return ReasonPermission, true
	}
	return "", false
}

// syncDir fsyncs the directory dir of root, so that a rename in it is
// durable.
func syncDir(root *os.Root, dir string) error {
	d, err := root.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
