//go:build linux

package workspace

import (
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// readReplaced returns what the file id at name (relative to the root)
// replaced, as the write that made it noted on it (replacedAttr); nil
// when it carries no note, or one of another file (a copy that kept the
// attributes of the one the tools wrote: see writeReplaced), or name
// holds another file by now.
func (w *Workspace) readReplaced(name string, id entryID) []entryID {
	var ids []entryID
	_ = w.withFile(name, id, func(fd int) error {
		buf := make([]byte, (maxReplaced+1)*51)
		n, err := unix.Fgetxattr(fd, replacedAttr, buf)
		if err != nil {
			return err
		}
		for _, f := range strings.Fields(string(buf[:n])) {
			parts := strings.Split(f, ":")
			if len(parts) != 3 {
				ids = nil
				return unix.EINVAL
			}
			d, derr := strconv.ParseUint(parts[0], 16, 64)
			i, ierr := strconv.ParseUint(parts[1], 16, 64)
			b, berr := strconv.ParseInt(parts[2], 16, 64)
			if derr != nil || ierr != nil || berr != nil {
				ids = nil
				return unix.EINVAL
			}
			ids = append(ids, entryID{d, i, b})
		}
		return nil
	})
	if len(ids) < 2 || ids[0] != id {
		return nil
	}
	return ids[1:]
}

// writeReplaced notes on the file id at name (relative to the root),
// which the tools just wrote, what it replaced (replacedAttr), after
// the file's own identity: a copy that keeps the attribute (cp -a, an
// editor that saves by renaming the file to a backup and writing a new
// one) is another file, which replaced nothing of the tools', while the
// one written may now be at a name commands see. A file
// system without user extended attributes, or a file the process may
// not change them on (one it may not write), leaves it without: the
// workspaces of other processes then take it for a move.
func (w *Workspace) writeReplaced(name string, id entryID, ids []entryID) {
	if len(ids) == 0 {
		return
	}
	var b []byte
	for _, r := range append([]entryID{id}, ids...) {
		b = strconv.AppendUint(b, r.dev, 16)
		b = append(b, ':')
		b = strconv.AppendUint(b, r.ino, 16)
		b = append(b, ':')
		b = strconv.AppendInt(b, r.birth, 16)
		b = append(b, ' ')
	}
	err := w.withFile(name, id, func(fd int) error {
		return unix.Fsetxattr(fd, replacedAttr, b[:len(b)-1], 0)
	})
	if err != nil {
		w.log.Debug("workspace: the file written at a path hidden from commands does not say what it replaced "+
			"(the workspaces other processes opened on the directory will take it for a move)", "path", name, "err", err)
	}
}

// withFile calls fn with name (relative to the root) opened for
// reading, reached following no link, when it is the regular file id.
func (w *Workspace) withFile(name string, id entryID, fn func(fd int) error) error {
	how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC, Resolve: noLinksBeneath}
	return w.fromRoot(func(root int) error {
		fd, err := w.sys.openBeneath(root, name, &how)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		if now, err := idOf(fd); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || now != id {
			return unix.ESTALE
		}
		return fn(fd)
	})
}
