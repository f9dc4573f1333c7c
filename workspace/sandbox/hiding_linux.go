//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"slices"
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

// birthOf is when the file at path (not followed, if a link) was made
// (see [HiddenPath.Birth]), when it is still the inode ino: 0 when the
// file system does not say, or path holds another file by now.
func birthOf(path string, ino uint64) int64 {
	var stx unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_INO|unix.STATX_BTIME, &stx) != nil || stx.Ino != ino {
		return 0
	}
	return statxBirth(&stx)
}

// statxBirth is when the file stx describes was made (see
// [HiddenPath.Birth]): 0 when its file system does not say.
func statxBirth(stx *unix.Statx_t) int64 {
	if stx.Mask&unix.STATX_BTIME == 0 {
		return 0
	}
	return stx.Btime.Sec*1e9 + int64(stx.Btime.Nsec)
}

// globHidden returns the existing paths that match pattern (absolute,
// see filepath.Match), as filepath.Glob does, but follows a link in the
// workspace wsPath (a command's) on the way to a directory it lists
// only when it leads to a place in the workspace, the workspace itself
// included (see listDir): a command's link can not lead the matching
// outside, and what the host wrote through such a link (config -> .,
// for config/*.key: config/a.key lands at a.key) is matched where it
// is (its match, resolved as resolveHidden does, is hidden at its real
// place; a match that resolves to the workspace itself is not hidden).
// Only the directories a component with a pattern needs are listed,
// each real directory once per component, whatever number of paths
// lead to it (links to the workspace, or loops, multiply the paths,
// not the listings: the matches through the paths left out are the
// same real files); a directory that cannot be listed is left out, as
// Glob leaves it.
func globHidden(seen lstats, pattern, wsPath string) ([]string, error) {
	return globDirs(seen, pattern, func(d string) (string, bool) { return dirToList(seen, d, wsPath) })
}

// globOpened returns the existing paths that match pattern (absolute),
// as the workspace is opened ([ResolveHide]): as globHidden does, but
// following every link on the way to a directory it lists, as the
// paths to hide are then resolved. Each real directory is listed once
// per component, so that links to a directory it is in (l -> .) do
// not multiply the listings, and only a directory is opened, never a
// FIFO, at a pattern's directory or where a link there leads.
func globOpened(pattern string) ([]string, error) {
	seen := lstats{}
	return globDirs(seen, pattern, func(d string) (string, bool) { return resolveLinks(seen, d, "", true) })
}

// globDirs matches pattern (absolute) component by component, listing
// where toList says each directory a component with a wildcard needs
// leads (ok false: nowhere to list), each such place once per
// component: see globHidden.
func globDirs(seen lstats, pattern string, toList func(dir string) (string, bool)) ([]string, error) {
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
		listed := map[string]bool{}
		for _, d := range cur {
			if !isPattern(c) {
				next = append(next, filepath.Join(d, c))
				continue
			}
			r, ok := toList(d)
			if !ok || listed[r] {
				continue
			}
			listed[r] = true
			names, err := listDir(r)
			if err != nil {
				continue
			}
			for _, n := range names {
				if matchName(c, n) {
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

// dirToList returns where dir leads, following links in the workspace
// wsPath only to a place in it, the workspace itself included (a link
// a command made at a pattern's directory, through which the host may
// write); ok is false when it leads nowhere or elsewhere.
func dirToList(seen lstats, dir, wsPath string) (r string, ok bool) {
	if r, ok = resolveOutside(seen, dir, wsPath); ok {
		return r, true
	}
	if r, ok = resolveLinks(seen, dir, wsPath, true); !ok || !within(r, wsPath) {
		return "", false
	}
	return r, true
}

// listDir returns the names in the directory r (resolved), opening
// nothing but a directory (never a FIFO, which would block).
func listDir(r string) ([]string, error) {
	return openAndList(r, unix.O_NOFOLLOW)
}

// listDirAt is listDir of d, following the links on the way (the last
// one included).
func listDirAt(d string) ([]string, error) { return openAndList(d, 0) }

// openAndList opens the directory r with the flags flags besides those
// that open only a directory, without blocking, and lists its names.
func openAndList(r string, flags int) ([]string, error) {
	fd, err := unix.Open(r, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK|unix.O_CLOEXEC|flags, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), r)
	defer f.Close()
	return f.Readdirnames(-1)
}

// matchName reports whether the name n matches c, a component of a
// pattern to hide, whatever their case when c has a wildcard (see
// [Config.Hide]): a pattern names a kind of file, *.pem the keys, and
// on a case-insensitive directory the case a name was written in is
// chance. A component whose wildcards are all escaped (s\[1\], as
// [HiddenPath.LedOut] keeps the names of a place) is a name, matched
// as written, byte for byte: on a case-sensitive directory S[1] is
// another directory. A malformed c matches nothing.
func matchName(c, n string) bool {
	if !hasWildcard(c) {
		ok, _ := filepath.Match(c, n)
		return ok
	}
	ok, _ := filepath.Match(strings.ToLower(c), strings.ToLower(n))
	return ok
}

// hasWildcard reports whether the component c of a pattern has a
// wildcard that is not escaped (see filepath.Match).
func hasWildcard(c string) bool {
	for i := 0; i < len(c); i++ {
		switch c[i] {
		case '\\':
			i++
		case '*', '?', '[':
			return true
		}
	}
	return false
}

// Glob returns the existing paths that match pattern, as filepath.Glob
// does, but a component of pattern with a wildcard matches names
// whatever their case, as a sandbox matches the paths to hide
// ([Config.Hide]); a component without one is a name, looked up as it
// is written (one whose wildcards are all escaped is matched as
// written, byte for byte). Links are followed, and a directory that cannot be
// listed is left out, as filepath.Glob does; only a directory is
// opened (never a FIFO, whose open would wait for a writer).
func Glob(pattern string) ([]string, error) {
	if _, err := filepath.Match(pattern, ""); err != nil {
		return nil, err
	}
	cur := []string{"."}
	if filepath.IsAbs(pattern) {
		cur = []string{"/"}
	}
	for c := range strings.SplitSeq(pattern, "/") {
		if c == "" {
			continue
		}
		var next []string
		for _, d := range cur {
			if !isPattern(c) {
				next = append(next, filepath.Join(d, c))
				continue
			}
			names, err := listDirAt(d)
			if err != nil {
				continue
			}
			slices.Sort(names)
			for _, n := range names {
				if matchName(c, n) {
					next = append(next, filepath.Join(d, n))
				}
			}
		}
		if cur = next; len(cur) == 0 {
			return nil, nil
		}
	}
	return slices.DeleteFunc(cur, func(m string) bool {
		_, err := os.Lstat(m)
		return err != nil
	}), nil
}

// onProcfs reports whether the directory dir is on a procfs, whose
// links (/proc/self, /proc/self/cwd, …) the kernel follows to what they
// stand for in the process that follows them, not to what they read as.
func onProcfs(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Type == unix.PROC_SUPER_MAGIC
}
