//go:build linux

package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A command's "mkfifo app" beside a HidePaths pattern ".../*/*.env"
// does not make the next commands' set-ups wait for a writer on the
// FIFO: they run, and Close returns.
func TestSandbox_HidePatternFIFOComponent(t *testing.T) {
	requireFullSandbox(t)
	dir := dirOutsideTmp(t)
	fifo := filepath.Join(dir, "app")
	ws, err := New(dir, &Options{HidePaths: []string{filepath.Join(dir, "*", "*.env")}})
	mustDo(t, err)
	closed := make(chan struct{})
	defer func() {
		go func() { ws.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(30 * time.Second):
			t.Errorf("Close does not return")
			for { // only once the test failed: let the stuck set-ups go on
				if f, err := os.OpenFile(fifo, os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
					f.Close()
				}
				select {
				case <-closed:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
	}()
	if res := runIn(t, ws, "mkfifo app && echo made"); res.Stdout != "made\n" {
		t.Fatalf("mkfifo: %+v", res)
	}
	for i := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r, err := ws.RunCommand(ctx, RunCommandInput{Command: "echo ran"})
		cancel()
		if err != nil || r.Stdout != "ran\n" {
			t.Errorf("command %d after mkfifo: %q, %q, %v", i, r.Stdout, r.Error, err)
		}
	}
}

// What matches a HidePaths pattern, or a path missing when New ran,
// once a command starts is hidden from it, though it was written after
// the sandbox of that command would have been prepared ahead (by New
// for the first command, by Warm or the end of the previous command for
// the next).
func TestSandbox_HideMatchedWhenCommandStarts(t *testing.T) {
	requireFullSandbox(t)
	dir := dirOutsideTmp(t)
	ws, err := New(dir, &Options{HidePaths: []string{filepath.Join(dir, "*.key"), filepath.Join(dir, "later")}})
	mustDo(t, err)
	defer ws.Close()
	writeFile(t, filepath.Join(dir, "first.key"), "SECRET-1")
	writeFile(t, filepath.Join(dir, "later"), "SECRET-L")
	if res := runIn(t, ws, "cat first.key later; echo ran"); res.Stdout != "ran\n" {
		t.Errorf("the first command sees what was written after New: %q", res.Stdout)
	}
	mustDo(t, ws.Warm(context.Background()))
	writeFile(t, filepath.Join(dir, "second.key"), "SECRET-2")
	if res := runIn(t, ws, "cat second.key; echo ran"); res.Stdout != "ran\n" {
		t.Errorf("the next command sees what was written after Warm: %q", res.Stdout)
	}
}

// Past the bounds of matching HidePaths patterns (more than 1024
// matches), commands are refused rather than run with only some matches
// hidden; the error names the pattern and says how to
// recover, and removing the files from outside the sandbox recovers.
func TestSandbox_HidePatternTooManyMatches(t *testing.T) {
	requireFullSandbox(t)
	dir := dirOutsideTmp(t)
	pattern := filepath.Join(dir, "*.key")
	ws, err := New(dir, &Options{HidePaths: []string{pattern}})
	mustDo(t, err)
	defer ws.Close()
	if res := runIn(t, ws, `i=0; while [ $i -le 1024 ]; do : > $i.key; i=$((i+1)); done; echo made`); res.Stdout != "made\n" {
		t.Fatalf("making files: %+v", res)
	}
	explains := func(what, msg string) {
		t.Helper()
		if !strings.Contains(msg, pattern) || !strings.Contains(msg, "1024") || !strings.Contains(msg, "remove") {
			t.Errorf("%s: %q does not name the pattern, the bound, and what to do", what, msg)
		}
	}
	r, err := ws.RunCommand(context.Background(), RunCommandInput{Command: "echo ran"})
	if r.Stdout == "ran\n" {
		t.Fatalf("a command ran with more matches than can be hidden")
	}
	msg := r.Error
	if err != nil {
		msg = err.Error()
	}
	explains("RunCommand", msg)
	mustDo(t, os.Remove(filepath.Join(dir, "0.key")))
	if res := runIn(t, ws, "echo ran"); res.Stdout != "ran\n" {
		t.Errorf("once a file was removed: %+v", res)
	}
}

// A path that matches a HidePaths pattern, or a path missing when New
// ran, only once a command starts, keeps its identity: a command that
// renames the directory holding it (the file itself is covered and
// cannot be renamed) does not show it to the next command under the
// new name; the next command is refused instead.
func TestSandbox_HideLateMatchMoved(t *testing.T) {
	requireFullSandbox(t)
	for _, parent := range []string{"/tmp", "/var/tmp"} {
		dir, err := os.MkdirTemp(parent, "pw-test-")
		mustDo(t, err)
		defer os.RemoveAll(dir)
		mustDo(t, os.Mkdir(filepath.Join(dir, "keys"), 0o755))
		mustDo(t, os.Mkdir(filepath.Join(dir, "cfg"), 0o755))
		ws, err := New(dir, &Options{HidePaths: []string{filepath.Join(dir, "keys", "*.pem"), filepath.Join(dir, "cfg", "db.env")}})
		mustDo(t, err)
		defer ws.Close()
		writeFile(t, filepath.Join(dir, "keys", "new.pem"), "LATE-SECRET-1")
		writeFile(t, filepath.Join(dir, "cfg", "db.env"), "LATE-SECRET-2")
		res := runIn(t, ws, "cat keys/new.pem cfg/db.env; mv keys k2 && mv cfg c2 && echo moved")
		if strings.Contains(res.Stdout, "SECRET") || !strings.Contains(res.Stdout, "moved") {
			t.Fatalf("workspace in %s: first command: %+v", parent, res)
		}
		r, err := ws.RunCommand(context.Background(), RunCommandInput{Command: "cat k2/new.pem c2/db.env"})
		mustDo(t, err)
		if strings.Contains(r.Stdout, "SECRET") {
			t.Errorf("workspace in %s: a hidden file is visible once its directory was renamed: %q", parent, r.Stdout)
		} else if !strings.Contains(r.Error, "moved or replaced") {
			t.Errorf("workspace in %s: the next command: %+v, want it refused as a hidden path moved", parent, r)
		}
	}
}
