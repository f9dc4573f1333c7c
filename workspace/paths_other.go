//go:build unix && !linux

package workspace

import (
	"errors"
	"os"
)

// kernelNames says that fdPath does not work here: these systems have no
// /proc/self/fd, so the file tools resolve the name a file was opened by
// through the root instead (see nameInRoot).
const kernelNames = false

// fdPath fails: the kernel's name for an open file is not known here.
func fdPath(*os.File) (string, error) {
	return "", errors.New("no /proc/self/fd on this system")
}

// dirByName finds no name here: checkPath resolves the path through
// the root.
func (w *Workspace) dirByName(string) (string, bool) { return "", false }
