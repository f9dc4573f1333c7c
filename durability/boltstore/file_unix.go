//go:build unix

package boltstore

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// tryLock takes bbolt's own lock on f without waiting: flock(2),
// exclusive or shared when readOnly, which bbolt takes again on the same
// descriptor when it opens the file. It reports false when another
// descriptor holds a conflicting lock.
func tryLock(f *os.File, readOnly bool) (bool, error) {
	how := syscall.LOCK_EX
	if readOnly {
		how = syscall.LOCK_SH
	}
	err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

// lockHolder names the process holding a lock on f, from /proc/locks
// (Linux); empty when it cannot tell.
func lockHolder(f *os.File) string {
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || runtime.GOOS != "linux" {
		return ""
	}
	locks, err := os.Open("/proc/locks")
	if err != nil {
		return ""
	}
	defer locks.Close()
	return findLockHolder(locks, st.Ino, os.Getpid())
}

// syncDir fsyncs a directory, so that a rename in it is durable; it opens
// the directory with openFile (os.OpenFile, or a test's hook).
func syncDir(openFile func(string, int, os.FileMode) (*os.File, error), dir string) error {
	d, err := openFile(dir, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer d.Close()
	return errors.Join(d.Sync(), d.Close())
}

// descriptorFailure tells why f's descriptor takes no writes, as a write
// to it would: an error wrapping EBADF when it is closed (fcntl F_GETFL
// fails) or open read-only (its access mode), an error wrapping
// os.ErrClosed when f is. It returns nil when the descriptor is open for
// writing: the failure was something else.
func descriptorFailure(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var flags int
	var ferr error
	if err := rc.Control(func(fd uintptr) { flags, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil {
		return err
	}
	switch {
	case ferr != nil:
		return fmt.Errorf("the descriptor: %w", ferr)
	case flags&unix.O_ACCMODE == unix.O_RDONLY:
		return fmt.Errorf("the descriptor is open read-only, a write gets %w", syscall.EBADF)
	}
	return nil
}

// openFlags are added to the flags a store file is opened with: an open
// of a FIFO (or of a device that waits for a peer) then returns at once
// instead of blocking, and [regularFile] refuses it.
const openFlags = syscall.O_NONBLOCK
