package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/polyweave/polyweave-go/workspace/sandbox"
)

// tempPrefix starts the names of the temporary files writes create next
// to their target. A crash can leave one behind; nothing else uses it.
const tempPrefix = ".polyweave-write-"

// hiddenTempName is the name of the temporary file of a write of a path
// hidden from commands ([Options.HidePaths]), in the target's directory
// as any write's: a name of its own, one per directory, so that what a
// crash (or a removal that failed) leaves there, the content of a
// hidden path, is seen by no one. Every sandbox hides that name in the
// directory of each path to hide in the workspace, and of each match of
// a pattern (beneath a hidden directory, it is hidden with the rest);
// read_file and write_file refuse it as a component of a path
// (ReasonReserved), and listings leave it out; the next write of a
// hidden path in that directory removes it before it writes its own,
// and opening the workspace removes those left in those directories.
// Writes of hidden paths are one at a time, those of every workspace of
// the process (hiddenTempMu), and a folder's with those of other
// processes (lockTempDir: the write is refused while another holds the
// folder), so the one there as such a write begins is left over. A
// symbolic link a command made to it is followed by read_file as a
// link to the hidden path itself would be: the file tools read hidden
// paths, and the file holds what write_file or undo was writing there;
// write_file refuses to write through it.
const hiddenTempName = tempPrefix + "~hidden.tmp"

// WriteFile replaces (or creates) a file in the workspace atomically: the
// content goes to a temporary file in the target's directory, which is
// synced and renamed over the target, and the directory is synced. Missing
// parent directories are created inside the root. A failed write leaves
// the previous content in place and removes its temporary file.
//
// A path that is a symbolic link writes to the link's target, which must
// be inside the root, be a regular file and pass the extension allow-list
// under its own name, unless the path is one hidden from commands
// ([Options.HidePaths]): a link there, or on the way there, is refused
// (ReasonLinkToHidden), since the content would land where commands
// see it; so is a name differing only in case from such a path, which
// it is on a directory that ignores case (the refusal says so), unless
// both exist and are different files. Existing targets must be regular
// files with a single link that the process may open for writing (a
// read-only file, or another user's, is refused with ReasonPermission
// though its directory is writable); their permission bits are kept.
// A path hidden from commands is not written while a sandboxed command
// runs, which would see it, in this workspace or another open on its
// directory (see the package's documentation): the write is refused
// (ReasonHiddenInUse), to be tried again once the command has ended; so
// it is while another process writes a hidden path in the same folder,
// or in this workspace. Its temporary file has
// a name of its own, hidden from commands too (see hiddenTempName),
// which write_file and read_file refuse (ReasonReserved).
//
// A refused or failed write is a result with Success false, a Reason and
// an Error naming the path; the Go error is non-nil only when ctx was done
// before the call or the workspace is closed (ErrClosed).
func (w *Workspace) WriteFile(ctx context.Context, in WriteFileInput) (WriteFileResult, error) {
	return w.writeFile(ctx, in, nil)
}

// writeFile is WriteFile. record, when not nil, is told what the write
// replaces (the name it resolved, once: a link's target), before
// anything is written; an error from it fails the call, and nothing is
// written. When the name then resolves elsewhere (a command retargeted
// a link meanwhile), the write is refused with ReasonRetargeted: what
// record was told is what a write replaces, or nothing is; a result
// with Success false after record means nothing was written.
func (w *Workspace) writeFile(ctx context.Context, in WriteFileInput, record func(target string, perm fs.FileMode, exists bool) error) (WriteFileResult, error) {
	if err := w.enter(ctx, WriteFileToolName); err != nil {
		return WriteFileResult{}, err
	}
	defer w.calls.Done()

	if n := int64(len(in.Content)); n > w.opts.MaxWriteBytes {
		return w.writeRefused(in.Path, refuse(ReasonTooLarge, fmt.Sprintf(
			"%d bytes; one write may hold at most %d: write a smaller file or split the content", n, w.opts.MaxWriteBytes))), nil
	}
	name, rf := w.checkWriteName(in.Path)
	if rf != nil {
		return w.writeRefused(in.Path, rf), nil
	}
	if w.hookAfterCheck != nil {
		w.hookAfterCheck()
	}
	target, perm, exists, rf := w.writeTarget(name)
	if rf == nil && target != name {
		// A link at name, followed: one a command planted after the
		// check (linkToHidden) is refused on what was followed.
		if rf = w.linkedHidden(name, name); rf == nil {
			rf = reservedOnTheWay(target)
		}
	}
	if rf != nil {
		return w.writeRefused(in.Path, rf), nil
	}
	if record != nil {
		if err := record(target, perm, exists); err != nil {
			return WriteFileResult{}, err
		}
		if again, _, _, rf := w.writeTarget(name); rf != nil || again != target {
			return w.writeRefused(in.Path, refuse(ReasonRetargeted, "the path led to "+strconv.Quote(target)+
				" and then elsewhere (a symbolic link was changed meanwhile); nothing was written")), nil
		}
	}
	if rf := w.replace(target, perm, exists, in.Content); rf != nil {
		return w.writeRefused(in.Path, rf), nil
	}
	return WriteFileResult{Success: true, Path: name, Bytes: len(in.Content)}, nil
}

// checkWriteName checks the path of a write (write_file's, undo's):
// the name itself, its extension, and no link on the way to a path
// hidden from commands; it returns the name, cleaned.
func (w *Workspace) checkWriteName(path string) (string, *refusal) {
	name, rf := w.checkPath(path)
	if rf == nil {
		rf = w.checkExt(name)
	}
	if rf == nil {
		rf = w.linkToHidden(name)
	}
	return name, rf
}

func (w *Workspace) writeRefused(path string, rf *refusal) WriteFileResult {
	rf = w.explain(path, rf)
	msg := rf.message(WriteFileToolName, path)
	w.log.Debug("write_file refused", "path", path, "reason", string(rf.reason), "detail", rf.detail)
	return WriteFileResult{Error: msg, Reason: rf.reason}
}

// linkToHidden refuses a write to name, a path hidden from commands
// (see [Options.HidePaths]: one of them, beneath one, or a match of a
// pattern), when a symbolic link is on the way to it, the name itself
// included: a link there is a command's (a path to hide is never one
// when it is hidden from the start), and the content would land where
// the link leads, a name commands see.
func (w *Workspace) linkToHidden(name string) *refusal {
	if w.sandbox == nil || len(w.sandbox.Resolved) == 0 {
		return nil
	}
	link, ok := w.linkOnTheWay(name)
	if !ok {
		return nil
	}
	return w.linkedHidden(name, link)
}

// linkedHidden refuses a write to name, with the symbolic link link on
// the way to it, when name is a path hidden from commands (see
// linkToHidden).
func (w *Workspace) linkedHidden(name, link string) *refusal {
	if w.sandbox == nil || len(w.sandbox.Resolved) == 0 {
		return nil
	}
	hidden, folded := w.hiddenName(name)
	if !hidden {
		return nil
	}
	what := "the path is one that commands must not see"
	if folded != "" {
		what = fmt.Sprintf("the path differs only in case from %q, one that commands must not see, "+
			"and is that path on a directory that ignores case (whether this one does is not known)", folded)
	}
	return refuse(ReasonLinkToHidden, fmt.Sprintf("%q is a symbolic link (a command's, perhaps) and %s: "+
		"written through the link, the content would be visible to them; remove the link first", link, what))
}

// hiddenName reports whether name (relative to the workspace) is a path
// to hide, beneath one, or a match of a pattern to hide (or beneath one).
// A path to hide that is the workspace's ancestor hides what is around
// the workspace, which stays visible in it ([sandbox.CheckHide]):
// nothing in the workspace is beneath it for that.
//
// A directory may be case-insensitive: vfat, exfat and ntfs3 mounts,
// ext4's casefold directories (and the defaults of macOS and Windows,
// where there is no sandbox, so nothing is hidden and this is never
// asked). There "SEC/KEY.TXT" names what a path to hide, "sec/key.txt",
// names. So a name that matches a path or pattern to hide only once
// case is folded is compared by what it names (sameEntry): it is one to
// hide when it is the very entry (device and inode) the path to hide,
// or a match of the pattern, is (a pattern's wildcards match names
// whatever their case, as the sandbox's do: [sandbox.Glob], so y.PEM is
// a match of *.pem though another file than y.pem; a component whose
// wildcards are all escaped, S\[1\], is a name, S[1]); when neither
// exists yet, a directory on the way must be that same entry, and the
// names in it fold to the same. Both are looked up from the workspace's
// root, following no link (a link on the way is compared as the entry
// it is, at its depth): what a link leads to, which a command chooses
// and may change between this check and the write, decides nothing,
// and nothing outside the workspace is looked at. The last case is
// decided without knowing whether the directory folds case: on a
// case-sensitive one, a write through a link to a name differing in
// case only from a path to hide that does not exist yet is refused
// too, which is safe, and the refusal says the name differs only in
// case. Names equal only under full case folding ("ß" and "ss") or
// Unicode normalization (ext4's casefold takes "é" and "e" with a
// combining accent for one) are not compared, existing or not:
// strings.EqualFold does not take them for one.
//
// folded is, when name is one to hide only once case is folded, the
// path or pattern to hide it differs from (relative to the workspace),
// for the refusal to say so.
func (w *Workspace) hiddenName(name string) (hidden bool, folded string) {
	abs := filepath.Join(w.dir, name)
	for _, h := range w.sandbox.Resolved {
		pattern := strings.ContainsAny(h.Path, "*?[")
		inside := strings.HasPrefix(h.Path, w.dir+string(filepath.Separator))
		if !pattern && inside && (abs == h.Path || strings.HasPrefix(abs, h.Path+string(filepath.Separator))) {
			return true, ""
		}
		for p := abs; p != w.dir && p != filepath.Dir(p); p = filepath.Dir(p) {
			if pattern {
				if ok, _ := filepath.Match(h.Path, p); ok {
					return true, ""
				}
			}
			if foldMatch(h.Path, p, pattern) && w.sameEntry(p, h.Path, pattern) {
				rel, err := filepath.Rel(w.dir, h.Path)
				if err != nil {
					rel = h.Path
				}
				return true, rel
			}
		}
	}
	return false, ""
}

// foldMatch reports whether the path p matches the path or pattern h
// once case is folded.
func foldMatch(h, p string, pattern bool) bool {
	if !pattern {
		return strings.EqualFold(h, p)
	}
	ok, _ := filepath.Match(strings.ToLower(h), strings.ToLower(p))
	return ok
}

// entryID is the identity of an entry of the file system: its device
// and inode.
type entryID struct {
	dev, ino uint64
	birth    int64 // see sandbox.HiddenPath.Birth; 0 when the file system does not say
}

// sameEntry reports whether p (absolute, beneath the workspace), which
// folds to h (a path or pattern to hide), is the entry h, or one of its
// matches, is; or, when p does not exist or a link or a file is on the
// way to it, a parent of p that is the same entry as the parent of h
// at the same depth (see hiddenName). h is taken at p's depths, beneath
// the workspace (its part above folds to the workspace's path), and
// every entry is looked up from the root following no link
// (entryBeneath). It errs on the side of true when p cannot be looked
// at.
func (w *Workspace) sameEntry(p, h string, pattern bool) bool {
	rel, err := filepath.Rel(w.dir, p)
	if err != nil || !filepath.IsLocal(rel) {
		return true
	}
	ps := strings.Split(rel, string(filepath.Separator))
	hs := strings.Split(h, string(filepath.Separator))
	if len(hs) < len(ps) {
		return true
	}
	hs = hs[len(hs)-len(ps):]
	for d := len(ps); d > 0; d-- {
		id, err := w.entryBeneath(filepath.Join(ps[:d]...))
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENOTDIR) {
			continue
		}
		if err != nil {
			return true
		}
		matches := []string{filepath.Join(hs[:d]...)}
		if pattern {
			matches = w.globBeneath(hs[:d])
		}
		for _, m := range matches {
			if mid, err := w.entryBeneath(m); err == nil && mid == id {
				return true
			}
		}
		return false
	}
	// Nothing of p exists below the workspace: h is in the workspace
	// too (it folds to p), and no entry tells them apart.
	return true
}

// globBeneath returns the names beneath the root that match the
// pattern whose components are parts, as [sandbox.Glob] matches (a
// component with a wildcard matches names whatever their case; one
// whose wildcards are all escaped is a name: see escapedName), listing
// only directories reached following no link (namesBeneath); a
// directory that cannot be listed is left out.
func (w *Workspace) globBeneath(parts []string) []string {
	cur := []string{"."}
	for _, c := range parts {
		var next []string
		for _, d := range cur {
			if !strings.ContainsAny(c, "*?[") {
				next = append(next, filepath.Join(d, c))
				continue
			}
			if name, ok := escapedName(c); ok {
				next = append(next, filepath.Join(d, name))
				continue
			}
			names, err := w.namesBeneath(d)
			if err != nil {
				continue
			}
			for _, n := range names {
				if foldMatch(c, n, true) {
					next = append(next, filepath.Join(d, n))
				}
			}
		}
		cur = next
	}
	return cur
}

// escapedName returns the name the component c of a pattern names
// when its wildcards are all escaped (s\[1\] names s[1]), which the
// sandbox matches as written, byte for byte ([sandbox.Glob]): then,
// as for a name without a wildcard, what the name is, not its case,
// says whether it is hidden (sameEntry). ok is false when c has a
// wildcard that is not escaped.
func escapedName(c string) (name string, ok bool) {
	var b strings.Builder
	for i := 0; i < len(c); i++ {
		switch c[i] {
		case '\\':
			if i++; i == len(c) {
				return "", false // malformed: matches nothing, as the sandbox's
			}
		case '*', '?', '[':
			return "", false
		}
		b.WriteByte(c[i])
	}
	return b.String(), true
}

// writeTarget decides which name a write replaces: name itself, or the
// target of the symbolic link name. It returns the permission bits to give
// the new file and whether it replaces an existing one. When paths are
// hidden from commands, a link to a directory on the way is resolved too
// (throughLinks): the write is judged, and recorded, by where it lands.
func (w *Workspace) writeTarget(name string) (target string, perm fs.FileMode, exists bool, rf *refusal) {
	fi, err := w.root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		target, rf = w.throughLinks(name)
		return target, 0o644, false, rf
	case err != nil:
		return "", 0, false, classify(err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return w.linkTarget(name)
	}
	if rf := checkRegular(fi); rf != nil {
		return "", 0, false, rf
	}
	if rf := w.checkWritable(name); rf != nil {
		return "", 0, false, rf
	}
	if target, rf = w.throughLinks(name); rf != nil {
		return "", 0, false, rf
	}
	return target, fi.Mode().Perm(), true, nil
}

// throughLinks returns name (not itself a link) with a symbolic link on
// the way to it resolved: its deepest directory that exists, opened
// through the root, named as the kernel names it (realName). A write
// through pub -> sec to pub/key.txt lands in sec/key.txt, which may be
// a path hidden from commands: it is written as one (hiddenWrite), and
// what it replaced is recorded as sec/key.txt's, which an undo puts
// back there, not at pub/key.txt, which a command may have made a file
// of its own since. Only when paths are hidden: elsewhere a link on the
// way is followed and its name kept, as before.
func (w *Workspace) throughLinks(name string) (string, *refusal) {
	if w.sandbox == nil || len(w.sandbox.Resolved) == 0 {
		return name, nil
	}
	dir, rest := filepath.Dir(name), filepath.Base(name)
	if _, ok := w.linkOnTheWay(dir); !ok || dir == "." {
		return name, nil
	}
	for ; dir != "."; dir, rest = filepath.Dir(dir), filepath.Join(filepath.Base(dir), rest) {
		f, err := w.root.Open(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", w.classifyOpen(dir, err)
		}
		real, rf := w.realName(f, dir, true)
		f.Close()
		if rf != nil {
			return "", rf.context("cannot resolve the link on the way")
		}
		return filepath.Join(real, rest), nil
	}
	return name, nil
}

// checkWritable refuses to replace the existing file name when the
// process could not open it for writing: the rename that replaces it
// needs only the directory to be writable, and would otherwise let a
// write replace a read-only file, or one of another user.
func (w *Workspace) checkWritable(name string) *refusal {
	f, err := w.root.OpenFile(name, writeCheckFlags, 0)
	if err == nil {
		f.Close()
		return nil
	}
	if rf := classify(err); rf.reason == ReasonPermission {
		return refuse(ReasonPermission, "the file is not writable by this process; it is not replaced")
	}
	// Anything else (a file being executed, say) is left to the write.
	return nil
}

// linkTarget resolves the symbolic link name to a root-relative name. The
// link is opened through the root (which refuses an outward link), the
// name of the file opened is learnt (realName), then checked like any
// target.
func (w *Workspace) linkTarget(name string) (string, fs.FileMode, bool, *refusal) {
	f, err := w.root.OpenFile(name, openFlags, 0)
	if err != nil {
		return "", 0, false, w.classifyOpen(name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", 0, false, classify(err)
	}
	if rf := checkRegular(fi); rf != nil {
		return "", 0, false, rf
	}
	rel, rf := w.realName(f, name, true)
	if rf != nil {
		return "", 0, false, rf.context("cannot resolve the link")
	}
	if !w.extAllowed(rel) {
		return "", 0, false, refuse(ReasonExtension, "it resolves to "+strconv.Quote(filepath.Base(rel)))
	}
	if rf := w.checkWritable(rel); rf != nil {
		return "", 0, false, rf
	}
	return rel, fi.Mode().Perm(), true, nil
}

// replace writes content to a temporary file next to target and renames
// it into place, syncing the file and then the directory.
// On Linux the directory is reached following no link (replaceBeneath).
func (w *Workspace) replace(target string, perm fs.FileMode, exists bool, content string) *refusal {
	end, rf := w.hiddenWrite(target)
	if rf != nil {
		return rf
	} else if end != nil {
		defer end()
	}
	hidden := end != nil // hiddenTempMu held until end
	if done, rf := w.replaceBeneath(target, perm, exists, content, hidden); done {
		return rf
	}
	dir := filepath.Dir(target)
	if dir != "." {
		if err := w.root.MkdirAll(dir, 0o755); err != nil {
			return classify(err)
		}
	}
	tmp := filepath.Join(dir, tempName(hidden))
	if hidden {
		if dir != "." { // the root is locked already (hiddenWrite)
			unlock, rf := w.lockTempDirOf(dir)
			if rf != nil {
				return rf
			}
			defer unlock()
		}
		if err := w.root.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return leftoverRefused(err)
		}
	}
	f, err := w.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return classify(err)
	}
	err = writeSynced(f, content, perm, exists)
	if err == nil && w.hookCrash != nil && w.hookCrash() {
		return refuse(ReasonIO, "stopped before the rename, as by a crash (a test's)")
	}
	if err == nil && w.hookBeforeRename != nil {
		err = w.hookBeforeRename()
	}
	if err == nil {
		err = w.root.Rename(tmp, target)
	}
	if err != nil {
		if rerr := w.root.Remove(tmp); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			w.log.Warn("write_file: remove temporary file", "path", tmp, "err", rerr)
		}
		w.log.Debug("write_file: write failed", "target", target, "err", err)
		return classifyWrite(err, tmp, target)
	}
	// The rename is done; a failed directory sync only weakens durability
	// across a crash, so it is logged rather than reported as a failure.
	if err := syncDir(w.root, dir); err != nil {
		w.log.Warn("write_file: sync directory", "path", dir, "err", err)
	}
	return nil
}

// leftoverRefused refuses a write of a path hidden from commands whose
// folder holds, under hiddenTempName, what the write could not remove
// (err): a folder of that name, say, which a command may have made.
func leftoverRefused(err error) *refusal {
	return refuse(ReasonReserved, fmt.Sprintf("its folder holds %q, the name of the temporary file of such writes, "+
		"which could not be removed (%v); nothing was written: remove it", hiddenTempName, unwrapPathError(err)))
}

// hiddenTempMu makes the writes of paths hidden from commands in the
// process use hiddenTempName one at a time, those of every workspace:
// several may be open on one directory (hideMu is one workspace's), and
// one write would otherwise remove the temporary file of another in
// the same folder, or rename the other's content, written in part or
// whole, over its own target, another hidden path. Another process is
// kept apart by the lock on the folder (lockTempDir). Taken after
// hideMu.
var hiddenTempMu sync.Mutex

// lockHiddenTemp takes hiddenTempMu, waiting for the write that holds
// it.
func (w *Workspace) lockHiddenTemp() {
	if hiddenTempMu.TryLock() {
		return
	}
	if w.hookHiddenTempWait != nil {
		w.hookHiddenTempWait()
	}
	hiddenTempMu.Lock()
}

// hiddenTempBusy says why a write of a path hidden from commands is
// refused while another process writes one in the same folder.
const hiddenTempBusy = "another process is writing a path hidden from commands in the same folder " +
	"(a workspace it opened on this directory), and such writes keep their content under one name there " +
	"until it is renamed into place; nothing was written: write it again once that one is done"

// tempName is the name of the temporary file of a write, in its
// target's directory: hiddenTempName for a path hidden from commands,
// a random one starting with tempPrefix otherwise.
func tempName(hidden bool) string {
	if hidden {
		return hiddenTempName
	}
	return tempPrefix + strconv.FormatUint(rand.Uint64(), 36) + ".tmp"
}

// hiddenWrite keeps a write (or undo's removal) of target (relative to
// the root, cleaned) that is a path hidden from commands
// ([Options.HidePaths]: one of them, beneath one, or a match of a
// pattern) apart from the sandboxed commands: it is refused
// (ReasonHiddenInUse) while a run_command call is under way, or the
// processes of a command stopped may still run (reapLater), in this
// workspace or in another open on its directory, of the process or
// another (lockHideExclusive), and holds the next ones off until end is
// called. It holds hiddenTempMu until end too. With commands held off, a
// link on the way to target is looked for again (linkToHidden): one a
// command made since the name was checked is refused, and none can be
// made until end, so that the root, which follows links, takes the
// write nowhere else where openat2 is not available. A
// write while a command runs would show the path to it: the rename that
// puts the new file in place takes the cover its sandbox mounted on the
// old one with it (the kernel detaches a mount whose mount point is
// replaced in another namespace), a name to hide made now (one that did
// not exist, a new match of a pattern) has no cover at all, and the
// temporary file next to the target is visible too. A command started
// after the write finds the path covered, or its prepared sandbox stale
// and another prepared (see [sandbox.ErrPreparedStale]). Writing in
// place instead would keep an existing file's cover, but not cover a
// new one, and would give up the write's atomicity. end is nil when
// target is not hidden, or nothing is hidden.
//
// The sandboxes refuse to run a command when a path to hide that
// existed as the workspace was opened holds another file
// ([sandbox.ErrHiddenMoved]): what it held may have been moved to a
// name commands see. The new file the write renames over it is the
// tools' own, and the old one is gone, not moved: end notes what the
// new one replaced (noteWritten), or that undo removed it, and the
// sandboxes of every workspace open on the directory expect it from
// then on (currentHiddenIDs) where they expected the old one, so that
// their next command runs, with it hidden. A path that held another
// file already (replaced from outside the tools) is still refused.
func (w *Workspace) hiddenWrite(target string) (end func(), rf *refusal) {
	if w.sandbox == nil || len(w.sandbox.Resolved) == 0 {
		return nil, nil
	}
	if hidden, _ := w.hiddenName(target); !hidden {
		return nil, nil
	}
	w.hideMu.Lock()
	if w.commands > 0 {
		w.hideMu.Unlock()
		return nil, refuse(ReasonHiddenInUse, hiddenInUseDetail)
	}
	// One write of a hidden path of the process at a time
	// (hiddenTempMu), and none while a workspace open on the directory
	// runs a command, nor at once with another process's
	// (lockHideExclusive): taken in that order, released in the other.
	w.lockHiddenTemp()
	if rf := w.lockHideExclusive(); rf != nil {
		hiddenTempMu.Unlock()
		w.hideMu.Unlock()
		return nil, rf
	}
	unlock := func() {
		w.unlockHide()
		hiddenTempMu.Unlock()
		w.hideMu.Unlock()
	}
	// No command runs until end: a link a command made on the way since
	// the name was checked is seen now, and none is made afterwards
	// (the root follows links, where openat2 is not available).
	if rf := w.linkToHidden(target); rf != nil {
		unlock()
		return nil, rf
	}
	change, ok := w.hiddenChangeOf(target)
	if !ok {
		return unlock, nil
	}
	return func() {
		defer unlock()
		w.noteWritten(change)
	}, nil
}

// hiddenInUseDetail says why a write of a path hidden from commands is
// refused while one runs.
const hiddenInUseDetail = "a command is running (or one stopped is still being torn down), " +
	"and writing a path hidden from commands now would show it to that command; nothing was written: " +
	"write it once the command has ended"

// hiddenSharedInUseDetail says why a write of a path hidden from
// commands is refused while another workspace open on the directory runs
// one, another process writes such a path there, or a program of the
// host holds the lock they share (lockHideExclusive): which, the lock
// does not tell.
const hiddenSharedInUseDetail = "a command is running in a workspace open on this directory " +
	"(another session's, of this process or another), another process is writing a path hidden from commands there, " +
	"or a program of the host holds the lock on the directory that keeps such writes and the commands apart; " +
	"writing one now could show it to a command, so nothing was written: write it once that is over"

// hiddenInUse refuses (ReasonHiddenInUse), as hiddenWrite would now,
// a write of target that is a path hidden from commands while one
// runs: for an undo to refuse before it restores anything. A command
// may start after it said nil; hiddenWrite then refuses the write
// itself.
func (w *Workspace) hiddenInUse(target string) *refusal {
	if w.sandbox == nil || len(w.sandbox.Resolved) == 0 {
		return nil
	}
	if hidden, _ := w.hiddenName(target); !hidden {
		return nil
	}
	w.hideMu.Lock()
	defer w.hideMu.Unlock()
	if w.commands > 0 {
		return refuse(ReasonHiddenInUse, hiddenInUseDetail)
	}
	w.lockHiddenTemp()
	defer hiddenTempMu.Unlock()
	rf := w.lockHideExclusive()
	if rf == nil {
		w.unlockHide()
	}
	return rf
}

// hiddenIDsLocked is what the sandboxes of the workspace took the
// paths to hide to be ([sandbox.Config.Resolved]) at the latest
// set-up: the paths and identities found as the workspace was opened,
// with the identities of the files the tools wrote since in their
// place (currentHiddenIDs). w.hideMu held.
func (w *Workspace) hiddenIDsLocked() []sandbox.HiddenPath {
	if w.hiddenIDs != nil {
		return w.hiddenIDs
	}
	return w.sandbox.Resolved
}

// writeSynced writes content to the new file f, sets perm exactly when it
// replaces an existing file (creation applied the umask), syncs and
// closes f.
func writeSynced(f *os.File, content string, perm fs.FileMode, exists bool) error {
	_, err := f.WriteString(content)
	if err == nil && exists {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// classifyWrite is classify for errors while writing, where an errno
// like ENOSPC is the useful detail. The temporary file's name, which
// means nothing to the model, is replaced by the target's.
func classifyWrite(err error, tmp, target string) *refusal {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return classify(err)
	}
	if errors.As(err, new(*fs.PathError)) {
		return classify(err)
	}
	return refuse(ReasonIO, strings.ReplaceAll(err.Error(), tmp, target))
}

// hiddenTemps returns what the sandboxes hide besides resolved (the
// paths to hide as [sandbox.ResolveHide] found them): hiddenTempName in
// the directory of each of them in the workspace, resolved as they are,
// once what a crash left there is removed (removeLeftTemps).
func (w *Workspace) hiddenTemps(resolved []sandbox.HiddenPath) ([]sandbox.HiddenPath, error) {
	var paths []string
	for _, h := range resolved {
		if !strings.HasPrefix(h.Path, w.dir+string(filepath.Separator)) {
			continue // around the workspace, or led out of it
		}
		if p := filepath.Join(filepath.Dir(h.Path), hiddenTempName); !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		return nil, nil
	}
	// No write of the process makes or renames one meanwhile, which
	// would fail the resolution between its look-ups.
	w.lockHiddenTemp()
	defer hiddenTempMu.Unlock()
	for _, p := range paths {
		w.removeLeftTemps(p)
	}
	temps, _, err := sandbox.ResolveHideNoting(paths, w.dir)
	// What is there now is not the tools' (a FIFO, a folder, another
	// process's write under way): hidden while it is there, as a path
	// to hide that did not exist, but its going, by the next write of a
	// hidden path there, is no move that refuses the commands
	// ([sandbox.ErrHiddenMoved]).
	for i := range temps {
		temps[i].Dev, temps[i].Ino, temps[i].Birth = 0, 0, 0
	}
	return temps, err
}

// removeLeftTemps removes the temporary files of writes of hidden paths
// that p (absolute, in the workspace: a path or a pattern whose last
// component is hiddenTempName) names, which a crash left: regular files
// reached with no symbolic link on the way, in a folder no other
// process writes a hidden path in (lockTempDirOf). A directory that
// cannot be listed is passed over; the sandboxes hide what is left.
// hiddenTempMu held.
func (w *Workspace) removeLeftTemps(p string) {
	rel, err := filepath.Rel(w.dir, p)
	if err != nil || !filepath.IsLocal(rel) {
		return
	}
	names := []string{rel}
	if strings.ContainsAny(rel, "*?[") {
		names = w.globBeneath(strings.Split(rel, string(filepath.Separator)))
	}
	for _, name := range names {
		if _, link := w.linkOnTheWay(name); link {
			continue
		}
		if fi, err := w.root.Lstat(name); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		unlock, rf := w.lockTempDirOf(filepath.Dir(name))
		if rf != nil {
			continue // another process's write, under way
		}
		err := w.root.Remove(name)
		unlock()
		if err != nil {
			w.log.Warn("workspace: remove the temporary file a write of a hidden path left", "path", name, "err", err)
		} else {
			w.log.Info("workspace: removed the temporary file a write of a hidden path left (a crash, say)", "path", name)
		}
	}
}
