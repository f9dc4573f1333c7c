package boltstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
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
// ErrMaxSizeReached) and an I/O error (EIO) are cured by room made, a
// limit raised or a device back, without anything changing in this
// process.
func fileFailure(path string, err error) error {
	var why string
	switch {
	case err == nil || durability.IsPermanent(err): // marked already (or damage)
		return err
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
	return durability.Permanent(fmt.Errorf("%s %s: %w", path, why, err))
}
