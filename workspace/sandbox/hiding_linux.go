//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// fileID is the device and inode of fi (from Lstat).
func fileID(fi os.FileInfo) (dev, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), st.Ino
	}
	return 0, 0
}

// globHidden returns the existing paths that match pattern (absolute,
// see filepath.Match), as filepath.Glob does, but lists only the
// directories it reaches by following no link in the workspace wsPath
// (see resolveOutside): a command's link can neither lead the matching
// elsewhere nor make it list a large directory. Only the directories a
// component with a pattern needs are listed, each once per path that
// leads to it; a directory that cannot be listed is left out, as Glob
// leaves it.
func globHidden(seen lstats, pattern, wsPath string) ([]string, error) {
	parts := strings.Split(pattern, "/")
	for _, c := range parts {
		if _, err := filepath.Match(c, ""); err != nil {
			return nil, err
		}
	}
	cur := []string{"/"}
	for _, c := range parts {
		if c == "" {
			continue
		}
		var next []string
		for _, d := range cur {
			if !isPattern(c) {
				next = append(next, filepath.Join(d, c))
				continue
			}
			names, err := listDir(seen, d, wsPath)
			if err != nil {
				continue
			}
			for _, n := range names {
				if ok, _ := filepath.Match(c, n); ok {
					next = append(next, filepath.Join(d, n))
				}
			}
		}
		if cur = next; len(cur) == 0 {
			return nil, nil
		}
	}
	matches := cur[:0]
	for _, m := range cur {
		if _, err := seen.lstat(m); err == nil {
			matches = append(matches, m)
		}
	}
	return matches, nil
}

// listDir returns the names in the directory dir leads to, following no
// link in the workspace wsPath, and opening nothing but a directory
// (never a FIFO, which would block).
func listDir(seen lstats, dir, wsPath string) ([]string, error) {
	r, ok := resolveOutside(seen, dir, wsPath)
	if !ok {
		return nil, os.ErrNotExist
	}
	fd, err := unix.Open(r, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), r)
	defer f.Close()
	return f.Readdirnames(-1)
}
