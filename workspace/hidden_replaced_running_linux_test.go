//go:build linux

package workspace

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A hidden file replaced from outside the file tools (a new file
// renamed over it, as an editor saves) while a command runs is shown to
// that command: the kernel detaches the cover its sandbox mounted on
// the old file, in every namespace, when the file is renamed over. The
// package documents it as a limit. What it documents for the host
// holds: an exclusive flock(2) on the workspace's root, which a host
// takes to change a path to hide, is refused while the command runs
// (flock -x would wait for it), and the commands after the replacement
// are refused (sandbox.ErrHiddenMoved).
func TestHiddenFileReplacedFromOutsideWhileRunningIsShown(t *testing.T) {
	requireSandbox(t)
	dir := dirWithHiddenEnv(t)
	env := filepath.Join(dir, "cfg/.env")
	started, goOn := filepath.Join(dir, "started"), filepath.Join(dir, "go-on")
	mustDo(t, unix.Mkfifo(started, 0o600))
	mustDo(t, unix.Mkfifo(goOn, 0o600))
	ws, err := New(dir, hiddenEnvOptions(dir))
	mustDo(t, err)
	defer ws.Close()
	ctx := context.Background()

	done := make(chan RunCommandResult, 1)
	go func() {
		res, err := ws.RunCommand(ctx, RunCommandInput{Command: "echo > started; read x < go-on; cat cfg/.env; echo ran"})
		if err != nil {
			res.Error = err.Error()
		}
		done <- res
	}()
	opened := make(chan *os.File, 1)
	go func() {
		f, _ := os.Open(started) // until the command opens it to write
		if f != nil {
			_, _ = io.ReadAll(f) // its whole line: closed earlier, the shell's write would kill it (SIGPIPE)
		}
		opened <- f
	}()
	select {
	case f := <-opened:
		if f != nil {
			f.Close()
		}
	case res := <-done:
		// Let the goroutine waiting on the FIFO go.
		if f, err := os.OpenFile(started, os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		if f := <-opened; f != nil {
			f.Close()
		}
		t.Fatalf("the command ended before it started: %+v", res)
	}

	root, err := os.Open(dir)
	mustDo(t, err)
	defer root.Close()
	if err := unix.Flock(int(root.Fd()), unix.LOCK_EX|unix.LOCK_NB); !errors.Is(err, unix.EWOULDBLOCK) {
		t.Errorf("an exclusive flock on the workspace's root while a command runs: %v; want EWOULDBLOCK", err)
	}
	mustDo(t, os.WriteFile(env+".new", []byte("NEWSECRET"), 0o600))
	mustDo(t, os.Rename(env+".new", env))
	// The command is about to open go-on, or has: the open waits for it.
	go func() {
		if f, err := os.OpenFile(goOn, os.O_WRONLY, 0); err == nil {
			_, _ = f.WriteString("\n")
			f.Close()
		}
	}()
	res := <-done
	// Should the command have ended without reading go-on, the writer's
	// open above goes on once a reader comes.
	if f, err := os.OpenFile(goOn, os.O_RDONLY|unix.O_NONBLOCK, 0); err == nil {
		defer f.Close()
	}
	if !res.Sandboxed || !strings.Contains(res.Stdout, "NEWSECRET") || !strings.Contains(res.Stdout, "ran") {
		t.Errorf("the running command after a rename over its hidden file: %+v; want it to read the new file, "+
			"as the package documents (if the sandbox now keeps it hidden, say so there)", res)
	}
	res, err = ws.RunCommand(ctx, RunCommandInput{Command: "cat cfg/.env; echo ran"})
	mustDo(t, err)
	if strings.Contains(res.Stdout, "SECRET") || res.Sandboxed || !strings.Contains(res.Error, "moved or replaced") {
		t.Errorf("the command after the replacement: %+v; want it refused (moved or replaced)", res)
	}
}
