//go:build linux

package sandbox

import (
	"os"
	"syscall"
)

// fileID is the device and inode of fi (from Lstat).
func fileID(fi os.FileInfo) (dev, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), st.Ino
	}
	return 0, 0
}
