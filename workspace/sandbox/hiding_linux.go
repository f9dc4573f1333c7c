//go:build linux

package sandbox

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// fileID is the device and inode of fi (from Lstat).
func fileID(fi os.FileInfo) (dev, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), st.Ino
	}
	return 0, 0
}

// openDirToList opens the directory dir to list it, following no link
// and refusing anything but a directory without opening it (a FIFO or
// a device, whose open may block or act).
func openDirToList(dir string) (*os.File, error) {
	for {
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: dir, Err: err}
		}
		return os.NewFile(uintptr(fd), dir), nil
	}
}
