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
	}
	return filepath.Clean(name), nil
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

// checkResolvedExt applies the extension allow-list to the name an open
// file actually has, so a link like notes.txt -> .env cannot bypass it.
// The name comes from the open descriptor, not from resolving the path a
// second time, so it is the file that will be read.
func (w *Workspace) checkResolvedExt(f *os.File) *refusal {
	if w.exts == nil {
		return nil
	}
	real, err := fdPath(f)
	if err != nil {
		return refuse(ReasonIO, "cannot verify the resolved name: "+err.Error())
	}
	if !w.extAllowed(real) {
		return refuse(ReasonExtension, fmt.Sprintf("it resolves to %q", filepath.Base(real)))
	}
	return nil
}

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
