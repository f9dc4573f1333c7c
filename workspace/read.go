package workspace

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// listHint is the seed's hint on a directory listing, in our words.
const listHint = "Call read_file with one of these paths to read it, or with a directory path to list it."

// nonUTF8Hint is added to a listing with a name that is not UTF-8: the
// JSON shows its invalid bytes as U+FFFD, so the name shown names no file.
const nonUTF8Hint = "Names with \uFFFD are not valid UTF-8 and cannot be given to read_file or write_file as shown; " +
	"rename such a file with run_command (for example with a shell glob) to read it."

// ReadFile reads a text file in the workspace, or lists a directory: the
// root for an empty or blank path (reported as "."), any other directory
// by its path.
//
// A refused or failed read is a result with Success false, a Reason and
// an Error naming the path; the Go error is non-nil only when ctx was done
// before the call or the workspace is closed (ErrClosed).
func (w *Workspace) ReadFile(ctx context.Context, in ReadFileInput) (ReadFileResult, error) {
	if err := w.enter(ctx, ReadFileToolName); err != nil {
		return ReadFileResult{}, err
	}
	defer w.calls.Done()

	if strings.TrimSpace(in.Path) == "" {
		// As ".": the host's path of the workspace is not the model's
		// business.
		return w.readDir(".")
	}
	name, rf := w.checkPath(in.Path)
	if rf != nil && rf.reason == ReasonTrailingSlash {
		// "dir/" lists dir; only a file named with a trailing / is refused.
		if name, rf = w.checkPath(strings.TrimRight(in.Path, "/")); rf == nil {
			if fi, err := w.root.Stat(name); err == nil && !fi.IsDir() {
				rf = refuse(ReasonTrailingSlash, "it is a file")
			}
		}
	}
	if rf != nil {
		return w.readRefused(in.Path, rf), nil
	}
	f, err := w.root.OpenFile(name, openFlags, 0)
	if err != nil {
		return w.readRefused(in.Path, w.classifyOpen(name, err)), nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return w.readRefused(in.Path, classify(err)), nil
	}
	if fi.IsDir() {
		return w.list(f, name)
	}
	if rf := checkRegular(fi); rf != nil {
		return w.readRefused(in.Path, rf), nil
	}
	if rf := w.checkExt(name); rf != nil {
		return w.readRefused(in.Path, rf), nil
	}
	if rf := w.checkResolvedExt(f, name); rf != nil {
		return w.readRefused(in.Path, rf), nil
	}
	data, truncated, err := readCapped(f, fi.Size(), w.opts.MaxReadBytes)
	if err != nil {
		return w.readRefused(in.Path, classify(err)), nil
	}
	res := ReadFileResult{Success: true, Path: name, Bytes: max(fi.Size(), int64(len(data))), Truncated: truncated}
	if truncated {
		data = trimPartialRune(data)
	}
	if bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data) {
		res.Binary = true
		res.Hint = "The file is not UTF-8 text; its content is not returned."
		return res, nil
	}
	// data is not used after this, so the string can share its memory
	// (as strings.Builder does) instead of copying up to MaxReadBytes.
	res.Content = unsafe.String(unsafe.SliceData(data), len(data))
	if truncated {
		res.Hint = "The file is longer than the read limit; content holds its beginning."
	}
	return res, nil
}

func (w *Workspace) readRefused(path string, rf *refusal) ReadFileResult {
	rf = w.explain(path, rf)
	msg := rf.message(ReadFileToolName, path)
	w.log.Debug("read_file refused", "path", path, "reason", string(rf.reason), "detail", rf.detail)
	return ReadFileResult{Path: path, Error: msg, Reason: rf.reason}
}

// readDir opens the directory name in the root and lists it.
func (w *Workspace) readDir(name string) (ReadFileResult, error) {
	f, err := w.root.OpenFile(name, openFlags, 0)
	if err != nil {
		return w.readRefused(name, classify(err)), nil
	}
	defer f.Close()
	return w.list(f, name)
}

// list returns the sorted names in the open directory d, bounded by
// MaxListEntries. Names are read in batches and only the smallest
// MaxListEntries are kept, so memory stays bounded for huge directories.
func (w *Workspace) list(d *os.File, name string) (ReadFileResult, error) {
	limit := w.opts.MaxListEntries
	var names []string
	total := 0
	for {
		batch, err := d.Readdirnames(256)
		// The temporary file of a write of a path hidden from commands,
		// left by a crash, is the tools' own: it is not shown.
		batch = slices.DeleteFunc(batch, func(n string) bool { return n == hiddenTempName })
		total += len(batch)
		names = append(names, batch...)
		if len(names) > 2*limit {
			slices.Sort(names)
			names = names[:limit]
		}
		if errors.Is(err, io.EOF) || (err == nil && len(batch) == 0) {
			break
		}
		if err != nil {
			return w.readRefused(name, classify(err)), nil
		}
	}
	slices.Sort(names)
	res := ReadFileResult{Success: true, Path: name, IsDirectory: true, Hint: listHint}
	if len(names) > limit {
		names = names[:limit]
	}
	if total > limit {
		res.Truncated = true
		res.Hint += " The listing is cut to the first entries in sorted order."
	}
	if slices.ContainsFunc(names, func(n string) bool { return !utf8.ValidString(n) }) {
		res.Hint += " " + nonUTF8Hint
	}
	res.Files = names
	return res, nil
}

// readCapped reads at most limit bytes of f and reports whether more were
// there. size (from fstat) sizes the buffer; the file may change while it
// is read, so the limit is enforced on what is read.
func readCapped(f *os.File, size, limit int64) ([]byte, bool, error) {
	// One byte beyond the limit tells a cut file from one of exactly limit
	// bytes, and makes the final read see EOF for a file read whole.
	buf := make([]byte, 0, min(max(size, 0), limit)+1)
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > limit {
				return buf[:limit], true, nil
			}
			buf = slices.Grow(buf, int(min(int64(cap(buf)), limit+1-int64(len(buf)))))
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			if int64(len(buf)) > limit {
				return buf[:limit], true, nil
			}
			return buf, false, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
}

// trimPartialRune drops an incomplete UTF-8 sequence that a cut left at
// the end of b, so cut text is still valid UTF-8.
func trimPartialRune(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax-1 && i <= len(b); i++ {
		c := b[len(b)-i]
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			break
		}
	}
	return b
}
