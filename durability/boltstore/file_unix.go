//go:build unix

package boltstore

import (
	"errors"
	"os"
	"runtime"
	"syscall"
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

// syncDir fsyncs a directory, so that a rename in it is durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return errors.Join(d.Sync(), d.Close())
}
