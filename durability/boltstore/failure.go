package boltstore

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"syscall"

	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/polyweave/polyweave-go/durability"
)

// fileFailure marks a failure of the file at path that repeating the
// operation cannot cure as [durability.Permanent], saying why and naming
// the file: a store opened read-only, a file system mounted read-only, a
// permission the process lacks, the store's descriptor of the file closed
// or not open for writing. Other failures are returned as they are, not
// permanent, for callers to retry within their bounds: a full disk or
// quota (ENOSPC, EDQUOT), a file over a size limit (EFBIG, bbolt's
// ErrMaxSizeReached) and an I/O error (EIO) of a write are cured by room
// made, a limit raised or a device back, without anything changing in
// this process (a failed sync is not: see [Store.updateTx]).
//
// A failure to grow the file reaches it without its errno (see
// [resizeCause]); probe, when not nil, tells what the store's descriptor
// still takes then (see [descriptorFailure]).
func fileFailure(path string, err error, probe func() error) error {
	if err == nil || durability.IsPermanent(err) { // marked already (or damage)
		return err
	}
	err = resizeCause(err, probe)
	var why string
	switch {
	case errors.Is(err, bolterrors.ErrDatabaseReadOnly):
		why = "is open read-only (Options.ReadOnly): it takes no writes"
	case errors.Is(err, syscall.EROFS):
		why = "is on a read-only file system"
	case errors.Is(err, fs.ErrPermission):
		why = "is refused to this process: it lacks the permission"
	case errors.Is(err, syscall.EBADF), errors.Is(err, os.ErrClosed), errors.Is(err, bolterrors.ErrDatabaseNotOpen):
		why = "can no longer be written: the store's descriptor of it is closed or not open for writing"
	default:
		return err
	}
	return durability.Permanent(&fileError{path: path, why: why, err: err})
}

// fileError is a failure of the file at path that says why: its text
// names the file once, leaving it out of the cause's ("write /d/store.db:
// bad file descriptor" reads "write: bad file descriptor" after it).
type fileError struct {
	path, why string
	err       error
}

func (e *fileError) Error() string {
	return e.path + " " + e.why + ": " + strings.ReplaceAll(e.err.Error(), " "+e.path+":", ":")
}

func (e *fileError) Unwrap() error { return e.err }

// resizePrefix starts bbolt's error for a file it failed to grow: it
// formats the failed ftruncate's error with %s, which keeps its text and
// drops the errno.
const resizePrefix = "file resize error: "

// resizeCause returns err, a failure to grow the file, with the cause
// that bbolt dropped found again, so that fileFailure classifies it as it
// does the same failure of a write: the errno whose text ends the message
// (EROFS, EACCES, EPERM, EBADF), or else what probe reports of the
// store's descriptor (a descriptor open read-only fails ftruncate with
// EINVAL, but a write with EBADF). Other errors, and a resize error
// neither tells more about, are returned as they are.
func resizeCause(err error, probe func() error) error {
	msg := err.Error()
	if !strings.Contains(msg, resizePrefix) {
		return err
	}
	for _, errno := range []syscall.Errno{syscall.EROFS, syscall.EACCES, syscall.EPERM, syscall.EBADF} {
		if strings.HasSuffix(msg, ": "+errno.Error()) {
			return &causeError{err: err, cause: errno, text: msg}
		}
	}
	if probe == nil {
		return err
	}
	if cause := probe(); cause != nil {
		return &causeError{err: err, cause: cause, text: msg + " (" + cause.Error() + ")"}
	}
	return err
}

// causeError is err with a cause it lost found again: both are wrapped.
type causeError struct {
	err, cause error
	text       string
}

func (e *causeError) Error() string   { return e.text }
func (e *causeError) Unwrap() []error { return []error{e.err, e.cause} }

// syncFailedWhy says why a store whose sync failed takes no more writes.
const syncFailedWhy = "can no longer be written by this store: a commit's sync failed, so its pages in memory may differ from those on disk; close the store and open it again"

// dirSyncFailedWhy says why a store takes no more writes once the sync of
// its folder failed after Compact renamed its copy over the file.
const dirSyncFailedWhy = "can no longer be written by this store: Compact renamed its compacted copy over the file, then syncing the folder failed, so a crash may bring the old file back without the writes that follow; close the store and open it again"

// isSyncFailure reports whether err, from a bbolt write transaction, is a
// failed sync of the file: bbolt returns os.File.Sync's error (a
// *fs.PathError of op "sync") on most systems, and fdatasync's errno bare
// on Linux (every other system call of a commit comes wrapped, in a
// *fs.PathError or as text).
func isSyncFailure(err error) bool {
	if err == nil || durability.IsPermanent(err) {
		return false
	}
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		return pe.Op == "sync"
	}
	var errno syscall.Errno
	return errors.As(err, &errno)
}
