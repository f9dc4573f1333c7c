//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// setUpWithin sets up a sandbox of cfg rooted at dir and releases it,
// failing the test when the set-up does not return within a generous
// bound; unblock then lets a stuck set-up go on, so that the test ends.
func setUpWithin(t *testing.T, cfg Config, dir string, unblock func()) error {
	t.Helper()
	root, null := openRootAndNull(t, dir)
	done := make(chan error, 1)
	go func() {
		p, err := Prepare(defaults(t, cfg), root, null, null)
		if err == nil {
			p.Release()
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Errorf("the set-up did not return")
		unblock()
		return <-done
	}
}

// unblockFIFO opens the FIFO at path for writing, which lets a reader
// stuck opening it go on.
func unblockFIFO(path string) func() {
	return func() {
		for range 100 {
			if f, err := os.OpenFile(path, os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
				f.Close()
				return
			}
			time.Sleep(100 * time.Millisecond) // only once the test failed
		}
	}
}

// A FIFO where a pattern's directory component matches (a command's
// "mkfifo app" beside a pattern ".../*/*.env") is not a directory to
// list: the set-up neither opens it for reading (which would block until
// someone writes to it) nor fails.
func TestHidePatternFIFOComponent(t *testing.T) {
	dir := dirIn(t, "/var/tmp")
	cfg := resolvedConfig(t, dir, filepath.Join(dir, "*", "*.env"))
	fifo := filepath.Join(dir, "app")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := setUpWithin(t, cfg, dir, unblockFIFO(fifo)); err != nil {
		t.Errorf("the set-up failed: %v", err)
	}
}

// Odd files that match a pattern: a FIFO, a socket, a name with a
// newline, a loop of links. None makes the next set-up fail or hang,
// and each that is not a link is hidden.
func TestHidePatternOddMatches(t *testing.T) {
	dir := dirIn(t, "/var/tmp")
	cfg := resolvedConfig(t, dir, filepath.Join(dir, "*.key"), filepath.Join(dir, "*", "*.env"))
	fifo := filepath.Join(dir, "fifo.key")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: filepath.Join(dir, "sock.key")}); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, map[string]string{filepath.Join(dir, "nl\nx.key"): "NL-SECRET"})
	for _, l := range [][2]string{{"b.key", "a.key"}, {"a.key", "b.key"}, {"fifo.key", "d"}} {
		if err := os.Symlink(l[0], filepath.Join(dir, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := setUpWithin(t, cfg, dir, unblockFIFO(fifo)); err != nil {
		t.Fatalf("the set-up failed: %v", err)
	}
	out, _ := runIn(t, cfg, dir, `cat "$(printf 'nl\nx.key')"; test -p fifo.key && echo FIFO-VISIBLE; `+
		`test -S sock.key && echo SOCK-VISIBLE; echo ran`)
	if out != "ran\n" {
		t.Errorf("odd matches: %q, want only ran", out)
	}
}
