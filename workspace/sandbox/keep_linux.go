//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
)

// keptFile is a file of [KeptWithNetwork], resolved: the path it is
// shown at, and a detached copy (open_tree) of its mount, taken before
// the directory that holds it is hidden.
type keptFile struct {
	path string
	tree int
}

// keepFiles resolves the files of keep (see [KeptWithNetwork]) in the
// host's view, before anything is hidden, and returns those that a
// directory of defaults alone would hide, each with a copy of its
// mount; the directories of plan.outside that hold one are made
// ancestors (a writable tmpfs, read-only once the files are mounted).
// A file is left alone (hidden or visible as it would be) when it is
// not a regular file, when a link on the way to it is in the workspace
// wsPath, or when others or fixed (the hidden paths other than the
// defaults) cover it.
func keepFiles(keep, others []string, fixed []HiddenPath, wsPath string, plan *hidePlan) ([]keptFile, error) {
	var kept []keptFile
	var otherPlan *hidePlan
	for _, name := range keep {
		path, ok := resolveOutside(nil, name, wsPath)
		if !ok || within(path, wsPath) || slices.ContainsFunc(kept, func(k keptFile) bool { return k.path == path }) {
			continue
		}
		holder := slices.IndexFunc(plan.outside, func(h string) bool { return within(path, h) })
		if holder < 0 || plan.outside[holder] == path {
			continue // visible as it is, or hidden itself
		}
		if otherPlan == nil {
			op, err := planHiding(others, fixed, nil, wsPath, plan.system)
			if err != nil {
				return kept, err
			}
			otherPlan = &op
		}
		if slices.ContainsFunc(append(otherPlan.outside, otherPlan.inside...), func(h string) bool { return within(path, h) }) {
			continue
		}
		tree, err := cloneRegularFile(path)
		if errors.Is(err, errNotRegular) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) {
			continue
		}
		if err != nil {
			return kept, fmt.Errorf("keep %s visible: %w", name, err)
		}
		kept = append(kept, keptFile{path: path, tree: tree})
		if h := plan.outside[holder]; !slices.Contains(plan.ancestors, h) {
			plan.ancestors = append(plan.ancestors, h)
		}
	}
	return kept, nil
}

// errNotRegular says a file to keep visible is not a regular file.
var errNotRegular = errors.New("not a regular file")

// cloneRegularFile returns a detached, read-only copy of the mount of
// the regular file at path, opened without following links.
func cloneRegularFile(path string) (int, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return -1, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return -1, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return -1, errNotRegular
	}
	tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return -1, err
	}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH,
		&unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NOEXEC | unix.MOUNT_ATTR_NODEV}); err != nil {
		unix.Close(tree)
		return -1, err
	}
	return tree, nil
}

// mountKept mounts k's copy at its path, in the (writable) tmpfs that
// hides the directory holding it: the directories on the way are made,
// and an empty file to mount it on.
func mountKept(k keptFile) error {
	if err := os.MkdirAll(filepath.Dir(k.path), 0o755); err != nil {
		return err
	}
	fd, err := unix.Open(k.path, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o444)
	if err != nil {
		return err
	}
	unix.Close(fd)
	return unix.MoveMount(k.tree, "", unix.AT_FDCWD, k.path, unix.MOVE_MOUNT_F_EMPTY_PATH)
}
