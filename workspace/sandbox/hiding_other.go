//go:build !linux

package sandbox

import (
	"errors"
	"os"
)

// fileID is not needed where there is no sandbox.
func fileID(os.FileInfo) (dev, ino uint64) { return 0, 0 }

// openDirToList opens the directory dir to list it; anything else is
// refused. There is no sandbox here to set up: only what is checked
// before one is uses it.
func openDirToList(dir string) (*os.File, error) {
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, errors.New(dir + ": not a directory")
	}
	return os.Open(dir)
}
