//go:build linux

package workspace

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
