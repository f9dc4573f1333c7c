package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Limits on names, as Linux enforces them (NAME_MAX, PATH_MAX - 1).
const (
	maxComponentBytes = 255
	maxPathBytes      = 4095
)

// refusal is a failed file call: the reason plus an optional detail for
// the message. Its message names the tool and the path.
type refusal struct {
	reason Reason
	detail string
}

func (r *refusal) message(op, path string) string {
	shown := shownPath(path)
	if r.detail == "" {
		return fmt.Sprintf("%s %s: %s", op, shown, r.reason)
	}
	return fmt.Sprintf("%s %s: %s (%s)", op, shown, r.reason, r.detail)
}

// context says, in the detail of an I/O refusal, what was being done.
// Other refusals already say what is wrong with the file.
func (r *refusal) context(doing string) *refusal {
	if r.reason != ReasonIO {
		return r
	}
	return refuse(ReasonIO, doing+": "+r.detail)
}

// maxShownPath bounds how much of a path a message repeats: a model that
// sent a huge path does not get it back in full.
const maxShownPath = 200

// shownPath quotes path for a message (so a trailing space shows), cut
// to maxShownPath bytes with its full length said.
func shownPath(path string) string {
	if len(path) <= maxShownPath {
		return strconv.Quote(path)
	}
	cut := strings.ToValidUTF8(path[:maxShownPath], "")
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(cut), len(path))
}

// explain adds to a refusal of name what a model needs to act on it: that
// the workspace directory itself is gone, that a link on the way is what
// was refused, or that the name has invisible space at an end.
func (w *Workspace) explain(name string, rf *refusal) *refusal {
	if rf.reason == ReasonNotFound || rf.reason == ReasonIO || rf.reason == ReasonEscapes {
		if removed(w.rootDir) {
			return refuse(ReasonWorkspaceGone, "")
		}
	}
	if rf.reason == ReasonEscapes {
		if link, ok := w.linkOnTheWay(name); ok {
			return refuse(ReasonEscapes, fmt.Sprintf("%q is a symbolic link to a place outside the workspace", link))
		}
	}
	if trimmed := strings.TrimSpace(name); trimmed != name && trimmed != "" && rf.detail == "" {
		if rf.reason == ReasonNotFound || rf.reason == ReasonExtension {
			return refuse(rf.reason, "note: the path has white space at its start or end")
		}
	}
	return rf
}

// linkOnTheWay returns the first component of name (cleaned, relative)
// that is a symbolic link, looked at through the root.
func (w *Workspace) linkOnTheWay(name string) (string, bool) {
	name = filepath.Clean(name)
	if !filepath.IsLocal(name) {
		return "", false
	}
	prefix := ""
	for part := range strings.SplitSeq(name, "/") {
		prefix = filepath.Join(prefix, part)
		fi, err := w.root.Lstat(prefix)
		if err != nil {
			return "", false
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return prefix, true
		}
	}
	return "", false
}

func refuse(reason Reason, detail string) *refusal { return &refusal{reason: reason, detail: detail} }

// The errors of fdPath for a file it finds no path for. Like every
// detail of a refusal, they say what happened in the workspace's terms:
// no host path (of a file, of the workspace itself) reaches the model.
var (
	errDeleted = errors.New("the file was deleted since it was opened")
	errNoPath  = errors.New("the file has no path in the file system")
)

// checkName validates a tool-supplied path before any file system access
// and returns it cleaned. These checks only make refusals clear; the
// confinement itself is os.Root's, which also covers symbolic links and
// renames racing with the call. A name that passes may still be refused by
// os.Root.
func checkName(name string) (string, *refusal) {
	switch {
	case strings.TrimSpace(name) == "":
		return "", refuse(ReasonEmptyPath, "")
	case strings.IndexByte(name, 0) >= 0:
		return "", refuse(ReasonNUL, "")
	case len(name) > maxPathBytes:
		return "", refuse(ReasonNameTooLong, fmt.Sprintf("%d bytes, the limit is %d", len(name), maxPathBytes))
	case strings.IndexByte(name, '\\') >= 0:
		return "", refuse(ReasonBackslash, "")
	case hasPercentEscape(name):
		return "", refuse(ReasonPercentEncoded, "")
	case filepath.IsAbs(name):
		return "", refuse(ReasonAbsolute, "")
	case !filepath.IsLocal(name):
		return "", refuse(ReasonEscapes, "")
	case strings.HasSuffix(name, "/"):
		return "", refuse(ReasonTrailingSlash, "")
	}
	for part := range strings.SplitSeq(name, "/") {
		if len(part) > maxComponentBytes {
			return "", refuse(ReasonNameTooLong, fmt.Sprintf("a component has %d bytes, the limit is %d", len(part), maxComponentBytes))
		}
		if rf := reservedPart(part); rf != nil {
			return "", rf
		}
	}
	return filepath.Clean(name), nil
}

// reservedPart refuses part, a component of a path, when it is the
// name of the temporary file of a write of a path hidden from commands
// (hiddenTempName) in any case: on a folder that ignores case, that
// name is that very file.
func reservedPart(part string) *refusal {
	if !strings.EqualFold(part, hiddenTempName) {
		return nil
	}
	return refuse(ReasonReserved, strconv.Quote(part)+" is where a write of a path hidden from commands keeps "+
		"its content until it is renamed into place")
}

// reservedOnTheWay is reservedPart of each component of name (cleaned,
// relative): a write that a symbolic link leads there is refused as a
// write of that name is.
func reservedOnTheWay(name string) *refusal {
	for part := range strings.SplitSeq(filepath.ToSlash(name), "/") {
		if reservedPart(part) != nil {
			return refuse(ReasonReserved, "a symbolic link on the path leads to "+strconv.Quote(name)+
				", and "+strconv.Quote(part)+" is where a write of a path hidden from commands keeps its content until it is renamed into place")
		}
	}
	return nil
}

// checkPath is checkName for a path the workspace is to act on, and
// resolves its "." and ".." as the kernel does. Cleaned,
// "notes.txt/../x.txt" reads as "x.txt" and "notes.txt/." as
// "notes.txt", but the system finds no "notes.txt/.." nor "notes.txt/."
// (ENOTDIR; ENOENT when notes.txt does not exist), so the tools do not
// act on them either. And a ".." after a symbolic link to a directory is
// that directory's parent, not the directory the link sits in
// ("inner/../x.txt" where inner links to sub/inner is sub/x.txt). So the
// path up to its last ".." (or the whole path, when it ends in ".") is
// opened through the root, which refuses a ".." that leaves it ("up/.."
// where up links to ".."), and replaced by the name of the directory
// opened; the rest, with no "..", follows. What is then acted on is
// that name, within the root whatever the files become meanwhile. With
// no link on the way, that name is the one the path reads as once
// cleaned, which dirByName confirms without asking the kernel for the
// name (where it can: Linux).
func (w *Workspace) checkPath(path string) (string, *refusal) {
	name, rf := checkName(path)
	if rf != nil {
		return name, rf
	}
	last := -1
	for i := 0; i < len(path); {
		j := strings.IndexByte(path[i:], '/')
		if j < 0 {
			j = len(path) - i
		}
		if c := path[i : i+j]; c == ".." || c == "." && i+j == len(path) {
			last = i + j
		}
		i += j + 1
	}
	if last < 0 || path == "." {
		return name, nil
	}
	upTo := path[:last]
	dir, ok := "", false
	if !w.nameByPath {
		dir, ok = w.dirByName(upTo)
	}
	if !ok {
		if dir, rf = w.resolveDir(upTo); rf != nil {
			return name, rf
		}
	}
	return filepath.Join(dir, path[last:]), nil
}

// resolveDir opens upTo (see checkPath) through the root and returns the
// root-relative name of the directory opened.
func (w *Workspace) resolveDir(upTo string) (string, *refusal) {
	d, err := w.root.Open(upTo)
	if err != nil {
		rf := classify(err)
		if rf.reason == ReasonNotDirectory || rf.reason == ReasonNotFound {
			rf.detail = fmt.Sprintf("%s does not resolve to a directory", shownPath(upTo))
		}
		return "", rf
	}
	defer d.Close()
	fi, err := d.Stat()
	if err != nil {
		return "", classify(err)
	}
	if !fi.IsDir() { // not seen: the kernel finds no "." nor ".." in a file
		return "", refuse(ReasonNotDirectory, fmt.Sprintf("%s is not a directory", shownPath(upTo)))
	}
	dir, rf := w.realName(d, upTo, true)
	if rf != nil {
		if rf.reason == ReasonEscapes {
			// Moved out since it was opened: its host path is not said.
			rf = refuse(ReasonEscapes, fmt.Sprintf("%s resolves outside the workspace", shownPath(upTo)))
		}
		return "", rf.context("cannot resolve " + shownPath(upTo))
	}
	return dir, nil
}

// hasPercentEscape reports whether s contains %XX with two hex digits.
func hasPercentEscape(s string) bool {
	for i := strings.IndexByte(s, '%'); i >= 0 && i+2 < len(s); {
		if isHex(s[i+1]) && isHex(s[i+2]) {
			return true
		}
		j := strings.IndexByte(s[i+1:], '%')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// classify turns an error from an os.Root call into a refusal. os.Root
// reports an escape (by "..", an absolute or an outward symbolic link)
// with an error that is not an errno, so anything that is not an errno is
// an escape; errnos map to their meaning.
func classify(err error) *refusal {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return refuse(ReasonEscapes, unwrapPathError(err).Error())
	}
	if reason, ok := errnoReason(errno); ok {
		return refuse(reason, "")
	}
	return refuse(ReasonIO, errno.Error())
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// classifyOpen is classify for a failed open of name, telling a dangling
// symbolic link apart from a missing file and naming a socket.
func (w *Workspace) classifyOpen(name string, err error) *refusal {
	if errors.Is(err, syscall.ENXIO) {
		// open(2) gives ENXIO for a socket (and a device without a driver).
		if fi, lerr := w.root.Stat(name); lerr == nil {
			return refuse(ReasonNotRegular, "it is a "+kindOf(fi.Mode()))
		}
		return refuse(ReasonNotRegular, "")
	}
	r := classify(err)
	if r.reason == ReasonNotFound {
		if fi, lerr := w.root.Lstat(name); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return refuse(ReasonDanglingLink, "")
		}
	}
	return r
}

// extAllowed reports whether name's extension is in the allow-list.
func (w *Workspace) extAllowed(name string) bool {
	return w.exts == nil || w.exts[strings.ToLower(filepath.Ext(name))]
}

// checkExt refuses name when its extension is not allowed.
func (w *Workspace) checkExt(name string) *refusal {
	if w.extAllowed(name) {
		return nil
	}
	ext := filepath.Ext(name)
	if ext == "" {
		return refuse(ReasonExtension, "the name has no extension; allowed: "+strings.Join(w.opts.AllowedExtensions, ", "))
	}
	return refuse(ReasonExtension, fmt.Sprintf("%s is not one of %s", ext, strings.Join(w.opts.AllowedExtensions, ", ")))
}

// checkResolvedExt applies the extension allow-list to the name the open
// file f (opened through the root as name) actually has, so a link like
// notes.txt -> .env cannot bypass it. The name is the file that will be
// read: the kernel's name for the open descriptor, or name resolved
// through the root and confirmed to be the descriptor's file.
func (w *Workspace) checkResolvedExt(f *os.File, name string) *refusal {
	if w.exts == nil {
		return nil
	}
	real, rf := w.realName(f, name, false)
	if rf != nil {
		return rf.context("cannot verify the resolved name")
	}
	if !w.extAllowed(real) {
		return refuse(ReasonExtension, fmt.Sprintf("it resolves to %q", filepath.Base(real)))
	}
	return nil
}

// realName returns the name of the regular file f, which was opened
// through the root as name: the path the kernel has for f (fdPath), or,
// where the kernel has none or w.nameByPath says so, name resolved through
// the root (nameInRoot). With relative, the name is made relative to the
// root, and refused when it is not inside it.
func (w *Workspace) realName(f *os.File, name string, relative bool) (string, *refusal) {
	if w.hookBeforeName != nil {
		w.hookBeforeName()
	}
	if w.nameByPath {
		return w.nameInRoot(f, name)
	}
	realPath, err := fdPath(f)
	if err != nil {
		return "", refuse(ReasonIO, err.Error())
	}
	if !relative {
		return realPath, nil
	}
	// The root's own path is asked for now, not taken from w.dir, in case
	// the root directory was moved since New.
	d, err := w.root.Open(".")
	if err != nil {
		return "", classify(err)
	}
	defer d.Close()
	rootPath, err := fdPath(d)
	if err != nil {
		return "", refuse(ReasonIO, err.Error())
	}
	rel, err := filepath.Rel(rootPath, realPath)
	if err != nil || !filepath.IsLocal(rel) {
		// Opened through the root, it was inside: it was moved out since.
		// Where it is now is a host path, not said.
		return "", refuse(ReasonEscapes, "it was moved outside the workspace since it was opened")
	}
	return rel, nil
}

// maxLinks bounds the symbolic links nameInRoot follows for one name, as
// the kernels bound them (Linux follows 40, the BSDs 32).
const maxLinks = 40

// nameInRoot returns the root-relative name of the regular file f, which
// was opened through the root as name: name is resolved through the root
// one component at a time, following each symbolic link on the way as
// os.Root does (a link out of the root, or to an absolute path, is
// refused), and the name found must name the very file f is, or the call
// is refused: the path changed between the open and now.
func (w *Workspace) nameInRoot(f *os.File, name string) (string, *refusal) {
	var done []string // the components resolved, none a symbolic link
	todo := strings.FieldsFunc(name, isSeparator)
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case ".":
			continue
		case "..":
			if len(done) == 0 {
				return "", refuse(ReasonEscapes, "")
			}
			done = done[:len(done)-1]
			continue
		}
		p := filepath.Join(append(done[:len(done):len(done)], c)...)
		fi, err := w.root.Lstat(p)
		if err != nil {
			return "", classify(err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			done = append(done, c)
			continue
		}
		if links++; links > maxLinks {
			return "", refuse(ReasonSymlinkLoop, "")
		}
		target, err := w.root.Readlink(p)
		if err != nil {
			return "", classify(err)
		}
		if target == "" {
			return "", refuse(ReasonNotFound, filepath.ToSlash(p)+" is an empty link")
		}
		if isSeparator(rune(target[0])) || filepath.VolumeName(target) != "" {
			// The target, a host path, is not said.
			return "", refuse(ReasonEscapes, fmt.Sprintf("%q is a symbolic link to an absolute path, outside the workspace", filepath.ToSlash(p)))
		}
		todo = append(strings.FieldsFunc(target, isSeparator), todo...)
	}
	rel := filepath.Join(done...)
	if rel == "" {
		rel = "."
	}
	named, err := w.root.Lstat(rel)
	if err != nil {
		return "", classify(err)
	}
	opened, err := f.Stat()
	if err != nil {
		return "", classify(err)
	}
	if !os.SameFile(named, opened) {
		return "", refuse(ReasonIO, "the file was replaced while its name was checked")
	}
	return rel, nil
}

func isSeparator(r rune) bool { return r < 0x80 && os.IsPathSeparator(uint8(r)) }

// checkRegular refuses anything but a regular file with a single link.
func checkRegular(fi fs.FileInfo) *refusal {
	if !fi.Mode().IsRegular() {
		if fi.IsDir() {
			return refuse(ReasonIsDirectory, "")
		}
		return refuse(ReasonNotRegular, "it is a "+kindOf(fi.Mode()))
	}
	if n, ok := linkCount(fi); ok && n > 1 {
		return refuse(ReasonHardLink, fmt.Sprintf("%d links; it may be shared with a file outside the workspace", n))
	}
	return nil
}

func kindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	}
	return "special file"
}
