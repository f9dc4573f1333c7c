package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
)

// openFlags opens for reading; Windows has no FIFOs to block on or
// controlling terminals to acquire.
const openFlags = os.O_RDONLY

// writeCheckFlags open a file for writing, to learn whether the process
// may, without changing it.
const writeCheckFlags = os.O_WRONLY

// fileStandardInfo is FILE_STANDARD_INFO.
type fileStandardInfo struct {
	AllocationSize int64
	EndOfFile      int64
	NumberOfLinks  uint32
	DeletePending  bool
	Directory      bool
}

// removed reports whether the open directory d has been removed: it has
// no links left, or is deleted once its last handle is closed.
func removed(d *os.File) bool {
	var info fileStandardInfo
	err := windows.GetFileInformationByHandleEx(windows.Handle(d.Fd()), windows.FileStandardInfo,
		(*byte)(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info)))
	return err != nil || info.NumberOfLinks == 0 || info.DeletePending
}

// linkCount is unknown on Windows: the FileInfo of a file does not carry
// its number of links, so hard links are not refused there.
func linkCount(fs.FileInfo) (uint64, bool) { return 0, false }

// errnoReason is the refusal reason a Windows error means, if any.
func errnoReason(errno syscall.Errno) (Reason, bool) {
	switch {
	case errors.Is(errno, fs.ErrNotExist):
		return ReasonNotFound, true
	case errors.Is(errno, fs.ErrPermission):
		return ReasonPermission, true
	}
	switch errno {
	case windows.ERROR_CANT_RESOLVE_FILENAME:
		return ReasonSymlinkLoop, true
	case windows.ERROR_DIRECTORY:
		return ReasonNotDirectory, true
	case windows.ERROR_FILENAME_EXCED_RANGE:
		return ReasonNameTooLong, true
	}
	return "", false
}

// kernelNames says that fdPath works here (GetFinalPathNameByHandle).
const kernelNames = true

// fdPath returns the path Windows has for an open file
// (GetFinalPathNameByHandle), without the \\?\ prefix. Its errors do
// not show the path: that is a host path, which the model is not shown.
func fdPath(f *os.File) (string, error) {
	buf := make([]uint16, windows.MAX_LONG_PATH)
	n, err := windows.GetFinalPathNameByHandle(windows.Handle(f.Fd()), &buf[0], uint32(len(buf)), 0)
	if err != nil {
		return "", fmt.Errorf("GetFinalPathNameByHandle: %w", err)
	}
	if int(n) >= len(buf) {
		return "", fmt.Errorf("GetFinalPathNameByHandle: a path of %d characters", n)
	}
	p := windows.UTF16ToString(buf[:n])
	switch {
	case strings.HasPrefix(p, `\\?\UNC\`):
		p = `\\` + p[len(`\\?\UNC\`):]
	case strings.HasPrefix(p, `\\?\`):
		p = p[len(`\\?\`):]
	}
	if !filepath.IsAbs(p) {
		return "", errNoPath
	}
	return p, nil
}

// syncDir does nothing on Windows: a directory cannot be flushed there as
// on Unix systems (FlushFileBuffers fails on the handle a directory opens
// with), so a rename is as durable as NTFS's metadata journal makes it.
func syncDir(*os.Root, string) error { return nil }

// dirByName finds no name here: checkPath resolves the path through
// the root.
func (w *Workspace) dirByName(string) (string, bool) { return "", false }
