package boltstore

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// lockOffset is the byte the store locks with LockFileEx: the one below
// the last byte of the largest file, which bbolt locks itself. Neither is
// ever part of the data, so the locks, which Windows enforces on reads
// and writes, never stand in the way of reading or mapping the file.
// bbolt's lock is taken again when bbolt opens the file, on the same
// handle; a byte of its own keeps the two from conflicting (Windows
// does not let one handle lock a byte exclusively twice).
const lockOffset = ^uint64(0) - 1

// tryLock locks the store's byte of f without waiting, exclusively or
// shared when readOnly. It reports false when another handle, in this
// process or another, holds a conflicting lock. Windows releases the
// lock when the handle is closed or its process ends.
func tryLock(f *os.File, readOnly bool) (bool, error) {
	flags := uint32(windows.LOCKFILE_FAIL_IMMEDIATELY)
	if !readOnly {
		flags |= windows.LOCKFILE_EXCLUSIVE_LOCK
	}
	ol := windows.Overlapped{Offset: uint32(lockOffset & 0xFFFFFFFF), OffsetHigh: uint32(lockOffset >> 32)}
	err := windows.LockFileEx(windows.Handle(f.Fd()), flags, 0, 1, 0, &ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return false, nil
	}
	return err == nil, err
}

// lockHolder is empty: Windows does not say which process holds a lock.
func lockHolder(*os.File) string { return "" }

// syncDir does nothing on Windows: a directory cannot be flushed there as
// on Unix systems (FlushFileBuffers fails on the handle a directory opens
// with), so a rename or link is as durable as NTFS's metadata journal
// makes it, as for other stores on Windows.
func syncDir(func(string, int, os.FileMode) (*os.File, error), string) error { return nil }

// descriptorFailure is nil: bbolt grows a file on Windows without
// truncating it, so there is no resize failure to explain.
func descriptorFailure(*os.File) error { return nil }

// openFlags are added to the flags a store file is opened with (none on
// Windows, whose opens do not wait for a peer).
const openFlags = 0
