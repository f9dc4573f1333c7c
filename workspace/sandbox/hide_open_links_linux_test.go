//go:build linux

package sandbox

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// opensOf watches path for opens (inotify) and returns a function that
// says how many there were since: the kernel queues an open's event
// before the open returns, so none is missed.
func opensOf(t *testing.T, path string) func() int {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if _, err := unix.InotifyAddWatch(fd, path, unix.IN_OPEN); err != nil {
		t.Fatal(err)
	}
	return func() int {
		n := 0
		buf := make([]byte, 64*unix.SizeofInotifyEvent)
		for {
			k, err := unix.Read(fd, buf)
			if err == unix.EAGAIN {
				return n
			}
			if err != nil {
				t.Fatal(err)
			}
			for off := 0; off < k; {
				// struct inotify_event: wd, mask, cookie, len, name.
				if binary.NativeEndian.Uint32(buf[off+4:])&unix.IN_Q_OVERFLOW != 0 {
					n += 1 << 20 // more than the queue holds
				} else {
					n++
				}
				off += unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(buf[off+12:]))
			}
		}
	}
}

// A FIFO at a pattern's directory (sec, for sec/*.key), or a link to
// one, is no directory to list: resolving the paths to hide when the
// workspace is opened, and Glob, do not open it (an open of a FIFO
// waits for a writer: a command could make every later opening of its
// workspace hang).
func TestHideResolvedWithoutOpeningFIFOs(t *testing.T) {
	ws := t.TempDir()
	fifo := filepath.Join(ws, "sec")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sec", filepath.Join(ws, "tosec")); err != nil {
		t.Fatal(err)
	}
	// Held open for reading and writing, so that an open of it does
	// not wait here: the watch tells.
	held, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	opens := opensOf(t, fifo)
	if _, err := ResolveHide([]string{filepath.Join(ws, "sec", "*.key"), filepath.Join(ws, "tosec", "*.key")}, ws); err != nil {
		t.Fatal(err)
	}
	if n := opens(); n != 0 {
		t.Errorf("ResolveHide opened the FIFO at a pattern's directory %d times", n)
	}
	if _, err := Glob(filepath.Join(ws, "tosec", "*.key")); err != nil {
		t.Fatal(err)
	}
	if n := opens(); n != 0 {
		t.Errorf("Glob opened the FIFO at a pattern's directory %d times", n)
	}
}

// Links to the workspace itself (l0 -> ., and more) multiply the paths
// a pattern's matching goes through as the workspace is opened, not
// the listings: each real directory is listed once per component of
// the pattern, and what is found is still hidden.
func TestHideResolvedListsEachDirectoryOnce(t *testing.T) {
	ws := t.TempDir()
	writeFiles(t, ws, "a.key")
	for i := range 10 {
		if err := os.Symlink(".", filepath.Join(ws, "l"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	opens := opensOf(t, ws)
	r, err := ResolveHide([]string{filepath.Join(ws, "*", "*", "*", "*.key")}, ws)
	if err != nil {
		t.Fatal(err)
	}
	if n := opens(); n > 4 {
		t.Errorf("the workspace was listed %d times for a pattern of 4 components", n)
	}
	found := false
	for _, hp := range r {
		found = found || hp.Path == filepath.Join(ws, "a.key") && hp.Ino != 0
	}
	if !found {
		t.Errorf("a.key, matched through the links, is not among the paths to hide: %+v", r)
	}
}

// A pattern's match that leads to "/", to the workspace itself or
// nowhere (a loop) through a command's link (a.key -> /, b.key -> .,
// d.key -> d.key), and an exact path that does, lead nowhere as the
// workspace is opened, as they do at each set-up: the workspace opens,
// and the rest is hidden. "/", the workspace itself, a loop outside
// it, and a relative path or pattern, named as paths to hide, are
// refused.
func TestHideResolvedLinksToRootOrWorkspace(t *testing.T) {
	ws := t.TempDir()
	writeFiles(t, ws, "c.key")
	for link, to := range map[string]string{"a.key": "/", "b.key": ".", "d.key": "d.key", ".env": ".", "up": "/", "loop": "loop"} {
		if err := os.Symlink(to, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := resolvedConfig(t, ws, filepath.Join(ws, "*.key"), filepath.Join(ws, ".env"), filepath.Join(ws, "up"),
		filepath.Join(ws, "loop"))
	out, exit := runIn(t, cfg, ws, "cat c.key; ls .env/ up/usr/ >/dev/null && echo ran")
	if strings.Contains(out, "SECRET") || !strings.Contains(out, "ran") || exit.Code != 0 {
		t.Errorf("c.key is visible, or a link to the workspace or / hid something: %q %+v", out, exit)
	}
	loop := filepath.Join(t.TempDir(), "loop")
	if err := os.Symlink(loop, loop); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"/", ws, ws + "/.", loop, filepath.Join("rel", "*.key"), "rel"} {
		if _, err := ResolveHide([]string{h}, ws); !errors.Is(err, ErrConfig) {
			t.Errorf("ResolveHide(%q): %v, want ErrConfig", h, err)
		}
	}
}

// The links a pattern's directory holds as the workspace is opened are
// followed wherever they lead (sec -> ../elsewhere, for sec/*.key):
// what they lead to then is hidden, in addition to what the pattern
// matches at each set-up, by the set-up's own rules. A link found
// there cannot make a sandbox hide less: once it is replaced by a
// directory, what the host writes there is hidden.
func TestHideResolvedLinksOnlyHideMore(t *testing.T) {
	base := t.TempDir()
	ws, elsewhere := filepath.Join(base, "ws"), filepath.Join(base, "elsewhere")
	writeFiles(t, elsewhere, "x.key")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../elsewhere", filepath.Join(ws, "sec")); err != nil {
		t.Fatal(err)
	}
	cfg := resolvedConfig(t, ws, filepath.Join(ws, "sec", "*.key"))
	found := false
	for _, hp := range cfg.Resolved {
		found = found || hp.Path == filepath.Join(elsewhere, "x.key") && hp.Ino != 0
	}
	if !found {
		t.Errorf("where sec led as the workspace was opened is not hidden: %+v", cfg.Resolved)
	}
	if err := os.Remove(filepath.Join(ws, "sec")); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, ws, "sec/a.key", "sec/B.KEY")
	out, exit := runIn(t, cfg, ws, "cat sec/a.key sec/B.KEY; echo ran")
	if strings.Contains(out, "SECRET") || !strings.Contains(out, "ran") {
		t.Errorf("a match of the pattern is visible once the link found there is gone: %q %+v", out, exit)
	}
}
