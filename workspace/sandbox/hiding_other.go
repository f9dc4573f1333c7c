//go:build !linux

package sandbox

import (
	"os"
	"path/filepath"
)

// fileID is not needed where there is no sandbox.
func fileID(os.FileInfo) (dev, ino uint64) { return 0, 0 }

// birthOf is not needed where there is no sandbox.
func birthOf(string, uint64) int64 { return 0 }

// globHidden is filepath.Glob where there is no sandbox to set up.
func globHidden(_ lstats, pattern, _ string) ([]string, error) { return filepath.Glob(pattern) }

// globOpened is filepath.Glob where there is no sandbox to set up.
func globOpened(pattern string) ([]string, error) { return filepath.Glob(pattern) }

// Glob is filepath.Glob where there is no sandbox to set up, so nothing
// is hidden.
func Glob(pattern string) ([]string, error) { return filepath.Glob(pattern) }

// onProcfs is false where there is no sandbox: there is nothing to set
// up that reads a link.
func onProcfs(string) bool { return false }
