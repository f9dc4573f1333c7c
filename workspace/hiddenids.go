package workspace

import (
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/polyweave/polyweave-go/workspace/sandbox"
)

// The sandboxes refuse to run a command when a path to hide in the
// workspace that had an identity as the workspace was opened holds
// another file ([sandbox.ErrHiddenMoved]). A file the tools wrote there
// since, or the nothing undo left (and whatever comes there after it),
// is no such move, whichever workspace open on the directory wrote it:
// each write of a path hidden from commands notes what it replaced,
// and each workspace, as it sets a sandbox up, takes the file now at
// such a path for the one it expects when the tools put it in place of
// that one (currentHiddenIDs).
//
// The note is kept twice. The file itself carries it, in the extended
// attribute replacedAttr, for every workspace, of the process or
// another: it goes with the file, and a file that takes the inode
// number of one gone has none. It names the file it is on first: a
// copy that kept it (cp -a, an editor that saves by renaming the file
// to a backup commands see and writing a new one) carries a note of
// another file, which counts for nothing. The process keeps it too, in
// the book of the directory (hiddenBook), for an undo's removal, which
// leaves no file to carry it, and for a file that could not carry it (a
// file system without user extended attributes, a file the process may
// not change them on): the workspaces of other processes take those for
// a move, and refuse their commands until they are opened again. No
// place beside the file would do for them: the directory that held it,
// its attributes, any file in the workspace, are the commands' to
// write, and a note a command wrote would pass a move from outside for
// the tools' own. A book lasts while a workspace is open on its
// directory: those workspaces alone need it (one opened later finds
// what is there), and what it says of an inode number is then of a
// file of their days.
//
// An identity is a device, an inode number and, where the file system
// gives it, the file's birth (see sandbox.HiddenPath.Birth). A file
// system gives the number of a file gone to the next one made (ext4 at
// once): a workspace that set no sandbox up since the tools replaced
// the file it expects would otherwise take a file that got that number
// for the one expected, while the file the tools wrote was moved where
// commands see it.
//
// No command of these workspaces can set the attribute, the file being
// hidden from them from its rename on; one that can (a command of a
// workspace open on a folder around this one, which does not hide the
// path, or an unsandboxed one) could as well copy the file where
// commands see it, which no identity tells. A note keeps the
// identities of the last maxReplaced files replaced at the path: a
// workspace that set no sandbox up while more were written there (no
// command ran in it) refuses its commands, as after a move, until it is
// opened again.

// maxReplaced bounds the identities a note keeps of the files a file
// the tools wrote replaced at its path, most recent last.
const maxReplaced = 32

// replacedAttr is the extended attribute of a file the tools wrote at a
// path hidden from commands that says what it replaced there (see
// writeReplaced).
const replacedAttr = "user.polyweave.replaced"

// hiddenBook holds the notes the process keeps for a workspace
// directory (see above): replaced maps a file the tools wrote at a path
// hidden from commands to the identities it replaced there; removed
// maps a path (its case folded) undo removed to those of the file
// removed and the ones it replaced. A note goes when its file is
// replaced in turn, or a file written where one was removed. refs
// counts the workspaces open on the directory that use the book.
type hiddenBook struct {
	refs     int
	replaced map[entryID][]entryID
	removed  map[string][]entryID
}

// hiddenBooks are the books of the directories workspaces of the
// process are open on (see hiddenBook), by directory; the mutex guards
// them and what they hold.
var hiddenBooks = struct {
	sync.Mutex
	of map[string]*hiddenBook
}{of: map[string]*hiddenBook{}}

// openBook makes the workspace use the book of its directory, before
// the paths to hide are resolved, so that it holds every write that
// follows; closeBook ends that, and drops the book once no workspace
// open on the directory uses it.
func (w *Workspace) openBook() {
	hiddenBooks.Lock()
	defer hiddenBooks.Unlock()
	b := hiddenBooks.of[w.dir]
	if b == nil {
		b = &hiddenBook{replaced: map[entryID][]entryID{}, removed: map[string][]entryID{}}
		hiddenBooks.of[w.dir] = b
	}
	b.refs++
	w.book = b
}

func (w *Workspace) closeBook() {
	if w.book == nil {
		return
	}
	hiddenBooks.Lock()
	defer hiddenBooks.Unlock()
	if w.book.refs--; w.book.refs == 0 {
		delete(hiddenBooks.of, w.dir)
	}
	w.book = nil
}

// replacedAt returns what the file id at name (relative to the root)
// replaced, as the tools noted it: on the file, or else in the book.
func (w *Workspace) replacedAt(name string, id entryID) []entryID {
	if ids := w.readReplaced(name, id); ids != nil {
		return ids
	}
	hiddenBooks.Lock()
	defer hiddenBooks.Unlock()
	if w.book == nil {
		return nil
	}
	return w.book.replaced[id]
}

// hiddenChange is what a write of a path hidden from commands notes
// as it ends (see noteWritten): where, and what it replaced.
type hiddenChange struct {
	name     string    // relative to the root, as written
	before   entryID   // the file replaced; zero when there was none
	replaced []entryID // what that one replaced, as noted
}

// hiddenChangeOf looks at target, a path hidden from commands about to
// be written, with commands held off (see hiddenWrite). ok is false
// when what is there cannot be known.
func (w *Workspace) hiddenChangeOf(target string) (c hiddenChange, ok bool) {
	c.name = target
	before, err := w.entryBeneath(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		hiddenBooks.Lock()
		if w.book != nil {
			c.replaced = w.book.removed[foldedKey(w.dir, target)]
		}
		hiddenBooks.Unlock()
		return c, true
	case err != nil:
		return c, false
	}
	c.before, c.replaced = before, w.replacedAt(target, before)
	return c, true
}

// noteWritten notes, once the write of c.name is done, what the file
// there now replaced, or that undo removed it.
func (w *Workspace) noteWritten(c hiddenChange) {
	ids := c.replaced
	if c.before != (entryID{}) {
		ids = append(slices.Clone(ids), c.before)
	}
	if len(ids) > maxReplaced {
		ids = ids[len(ids)-maxReplaced:]
	}
	after, err := w.entryBeneath(c.name)
	removed := errors.Is(err, fs.ErrNotExist)
	if err != nil && !removed || after == c.before {
		return // not written (the write failed), or not known
	}
	key := foldedKey(w.dir, c.name)
	hiddenBooks.Lock()
	if b := w.book; b != nil {
		delete(b.replaced, c.before)
		if removed {
			b.removed[key] = ids
		} else {
			delete(b.removed, key)
			b.replaced[after] = ids
		}
	}
	hiddenBooks.Unlock()
	if !removed {
		w.writeReplaced(c.name, after, ids)
	}
}

// foldedKey is the key of a path in hiddenBook.removed: absolute, its
// case folded, for a path that differs only in case from one removed
// may be the same entry. What a note keeps are identities, which only
// the file tools' own writes and removals put there: one of another
// path matches no file expected at this one.
func foldedKey(dir, name string) string { return strings.ToLower(filepath.Join(dir, name)) }

// currentHiddenIDs is what the sandboxes take the paths to hide to be
// ([sandbox.Config.Resolved]) when a sandbox is set up: the paths and
// identities found as the workspace was opened, with, at a path the
// file tools of any workspace open on the directory wrote or removed
// since, what they put there (see above). A path that holds another
// file, not the tools', keeps the identity expected, and the sandbox
// refuses the command; unless undo removed what was expected there: it
// is gone, not moved, and the path is hidden from then on as one that
// held nothing as the workspace was opened, whatever comes there. No write of a hidden path of the process is
// under way meanwhile. w.hideMu held.
func (w *Workspace) currentHiddenIDs() []sandbox.HiddenPath {
	hiddenTempMu.Lock()
	defer hiddenTempMu.Unlock()
	ids := w.hiddenIDsLocked()
	var changed []sandbox.HiddenPath
	for i, h := range ids {
		if h.Dev == 0 && h.Ino == 0 {
			continue
		}
		rel, err := filepath.Rel(w.dir, h.Path)
		if err != nil || !filepath.IsLocal(rel) {
			continue // around the workspace: hidden whatever it holds
		}
		expected := entryID{h.Dev, h.Ino, h.Birth}
		now, err := w.entryBeneath(rel)
		switch {
		case err == nil && now != expected && slices.Contains(w.replacedAt(rel, now), expected):
		case (err == nil || errors.Is(err, fs.ErrNotExist)) && w.removedByTools(h.Path, expected):
			// What was expected is gone, not moved: the path is hidden
			// from now on as one that held nothing as the workspace was
			// opened, whatever comes there (see sandbox.HiddenPath).
			now = entryID{}
		default:
			continue
		}
		if changed == nil {
			changed = slices.Clone(ids)
		}
		changed[i].Dev, changed[i].Ino, changed[i].Birth = now.dev, now.ino, now.birth
	}
	if changed != nil {
		w.hiddenIDs = changed
		return changed
	}
	return ids
}

// removedByTools reports whether undo removed the file id was at path
// (absolute), or one that replaced it.
func (w *Workspace) removedByTools(path string, id entryID) bool {
	hiddenBooks.Lock()
	defer hiddenBooks.Unlock()
	return w.book != nil && slices.Contains(w.book.removed[strings.ToLower(path)], id)
}
