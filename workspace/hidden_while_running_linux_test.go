//go:build linux

package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/tools"
)

// A path hidden from commands written while a command runs (write_file,
// or undo's restore) stays hidden from it: the write is refused while
// the command runs, for renaming over the hidden file would detach the
// cover the command's sandbox put on it, and a name to hide made now
// (one that did not exist, a new match of a pattern) would not be
// covered at all. No temporary file of the write appears either. Once
// the command ended, the write succeeds.
func TestHiddenPathWrittenWhileACommandRunsStaysHidden(t *testing.T) {
	requireSandbox(t)
	for _, c := range []struct {
		name, hide, file string
		exists, undo     bool
	}{
		{"existing file", "cfg/.env", "cfg/.env", true, false},
		{"file made now", "cfg/later.env", "cfg/later.env", false, false},
		{"pattern, match made now", "cfg/*.pem", "cfg/a.pem", false, false},
		{"undo's restore of an existing file", "cfg/.env", "cfg/.env", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			mustDo(t, os.Mkdir(filepath.Join(dir, "cfg"), 0o755))
			if c.exists {
				mustDo(t, os.WriteFile(filepath.Join(dir, c.file), []byte("OLDSECRET"), 0o600))
			}
			ws, err := New(dir, &Options{Sandbox: SandboxRequired, HidePaths: []string{filepath.Join(dir, c.hide)}})
			mustDo(t, err)
			defer ws.Close()
			ready, goOn := filepath.Join(dir, "ready"), filepath.Join(dir, "go")
			mustDo(t, syscall.Mkfifo(ready, 0o600))
			mustDo(t, syscall.Mkfifo(goOn, 0o600))
			tempMade := false
			ws.hookBeforeRename = func() error {
				tempMade = true
				return nil
			}

			done := make(chan RunCommandResult, 1)
			go func() {
				res, err := ws.RunCommand(context.Background(), RunCommandInput{
					Command: "echo r > ready; read x < go; ls -a cfg; cat " + c.file + " 2>&1"})
				if err != nil {
					res.Error += "; " + err.Error()
				}
				done <- res
			}()
			waitFIFO(t, ready, done)

			var wrote bool
			var why string
			if c.undo {
				err := ws.restore(&writeRecord{Path: c.file, Existed: true, Perm: 0o600, Prev: []byte("NEWSECRET")})
				wrote = err == nil
				if err != nil {
					why = err.Error()
					// As write_file's refusal, undo's answers the call
					// as one that cannot be done now: it does not
					// count against the tool's circuit breaker.
					err = fmt.Errorf("workspace: undo: restore %s: %w", c.file, err) // as Journal.Undo says it
					var re *tools.ResultError
					if !errors.As(undoFailed(UndoResult{Error: err.Error()}, err), &re) || re.Kind != tools.FailureInvalidArguments {
						t.Errorf("undo refused while a command runs: answered as %+v, want kind %q", re, tools.FailureInvalidArguments)
					}
				}
			} else {
				res, err := ws.WriteFile(context.Background(), WriteFileInput{Path: c.file, Content: "NEWSECRET"})
				mustDo(t, err)
				wrote = res.Success
				why = res.Error
				if !res.Success && res.Reason != ReasonHiddenInUse {
					t.Errorf("write while a command runs: refused for %q, want %q", res.Reason, ReasonHiddenInUse)
				}
			}
			if tempMade {
				t.Errorf("a temporary file of the hidden path was made while a command ran")
			}
			if wrote {
				t.Errorf("the hidden path was written while a command ran")
			} else if !strings.Contains(why, "running") {
				t.Errorf("the refusal does not say a command is running: %q", why)
			}
			mustDo(t, os.WriteFile(goOn, []byte("\n"), 0)) // the command goes on
			res := <-done
			if !res.Sandboxed || res.Error != "" || res.TimedOut {
				t.Fatalf("the command did not run as it should: %+v", res)
			}
			if out := res.Stdout + res.Stderr; strings.Contains(out, "SECRET") || strings.Contains(out, tempPrefix) {
				t.Errorf("the command saw the hidden path, or a temporary file of it, written while it ran: %q", out)
			}

			// With no command running, the write goes through, and the
			// next command does not see it either.
			tempMade = false
			if c.undo {
				mustDo(t, ws.restore(&writeRecord{Path: c.file, Existed: true, Perm: 0o600, Prev: []byte("NEWSECRET")}))
			} else if res, err := ws.WriteFile(context.Background(), WriteFileInput{Path: c.file, Content: "NEWSECRET"}); err != nil || !res.Success {
				t.Fatalf("write with no command running: %+v, %v", res, err)
			}
			if got, err := os.ReadFile(filepath.Join(dir, c.file)); err != nil || string(got) != "NEWSECRET" {
				t.Errorf("after the write with no command running: %q, %v", got, err)
			}
			if !tempMade {
				t.Errorf("the write with no command running did not go through a temporary file")
			}
			// The file the tools put there is what the sandboxes expect
			// there: the next command runs, and the file is hidden.
			res, err = ws.RunCommand(context.Background(), RunCommandInput{Command: "ls -a cfg; cat " + c.file + " 2>&1"})
			mustDo(t, err)
			switch {
			case strings.Contains(res.Stdout, "SECRET"):
				t.Errorf("the next command read the hidden path: %q", res.Stdout)
			case !res.Sandboxed:
				t.Errorf("the next command did not run sandboxed: %+v", res)
			}
		})
	}
}

// waitFIFO waits until the command whose result done gives has opened
// the FIFO path for writing and written a line to it; it fails t when
// the command ended first.
func waitFIFO(t *testing.T, path string, done chan RunCommandResult) {
	t.Helper()
	got := make(chan error, 1)
	go func() {
		f, err := os.Open(path)
		if err == nil {
			_, err = f.Read(make([]byte, 8))
			f.Close()
		}
		got <- err
	}()
	select {
	case err := <-got:
		mustDo(t, err)
	case res := <-done:
		// Unblock the reader, which waits for a writer.
		if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		<-got
		t.Fatalf("the command ended before it was ready: %+v", res)
	}
}

// A command killed (here cancelled, ignoring SIGTERM, so its sandbox's
// helper is killed at the grace's end) leaves processes that die only
// as the helper's namespace is torn down, after the call returned: a
// hidden path is not written until the helper is reaped, which is once
// they are all gone.
func TestHiddenPathNotWrittenUntilAKilledSandboxIsGone(t *testing.T) {
	requireSandbox(t)
	dir := t.TempDir()
	ws, err := New(dir, &Options{Sandbox: SandboxRequired, KillGrace: 10 * time.Millisecond,
		HidePaths: []string{filepath.Join(dir, "key.env")}})
	mustDo(t, err)
	defer ws.Close()
	ready := filepath.Join(dir, "ready")
	mustDo(t, syscall.Mkfifo(ready, 0o600))
	reap := make(chan struct{})
	ws.hookReap = func() { <-reap }

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan RunCommandResult, 1)
	go func() {
		res, _ := ws.RunCommand(ctx, RunCommandInput{Command: "trap '' TERM; echo r > ready; while :; do sleep 1; done"})
		done <- res
	}()
	waitFIFO(t, ready, done)
	cancel()
	if res := <-done; res.StoppedBy != StoppedByCancel {
		close(reap)
		t.Fatalf("the command was not stopped by the cancel: %+v", res)
	}
	write := func() WriteFileResult {
		res, err := ws.WriteFile(context.Background(), WriteFileInput{Path: "key.env", Content: "SECRET"})
		mustDo(t, err)
		return res
	}
	if res := write(); res.Success || res.Reason != ReasonHiddenInUse {
		t.Errorf("write before the killed sandbox's helper was reaped: %+v, want it refused for %q", res, ReasonHiddenInUse)
	}
	close(reap)
	ws.reapers.Wait()
	if res := write(); !res.Success {
		t.Errorf("write once the killed sandbox is gone: %+v", res)
	}
}

// A hidden file present when the workspace was opened, written by
// write_file or undo's restore (a new file renamed over it), is what
// the sandboxes expect there from then on: the next command runs, and
// does not see it. The same file replaced from outside the tools after
// that still keeps commands from running (sandbox.ErrHiddenMoved), as
// does one replaced from outside before the tools write it: their
// write does not make it expected.
func TestHiddenFileWrittenByTheToolsKeepsCommandsRunning(t *testing.T) {
	requireSandbox(t)
	for _, c := range []struct {
		name          string
		undo, outside bool
	}{
		{"write_file", false, false},
		{"undo's restore", true, false},
		{"write_file over a file replaced from outside", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			key := filepath.Join(dir, "key.env")
			mustDo(t, os.WriteFile(key, []byte("OLDSECRET"), 0o600))
			ws, err := New(dir, &Options{Sandbox: SandboxRequired, HidePaths: []string{key}})
			mustDo(t, err)
			defer ws.Close()
			ctx := context.Background()
			if c.outside {
				mustDo(t, os.Rename(key, filepath.Join(dir, "moved.txt")))
				mustDo(t, os.WriteFile(key, []byte("OUTSIDE"), 0o600))
			}
			if c.undo {
				mustDo(t, ws.restore(&writeRecord{Path: "key.env", Existed: true, Perm: 0o600, Prev: []byte("NEWSECRET")}))
			} else if res, err := ws.WriteFile(ctx, WriteFileInput{Path: "key.env", Content: "NEWSECRET"}); err != nil || !res.Success {
				t.Fatalf("write_file: %+v, %v", res, err)
			}
			res, err := ws.RunCommand(ctx, RunCommandInput{Command: "cat key.env 2>&1; echo ran"})
			mustDo(t, err)
			if strings.Contains(res.Stdout, "SECRET") {
				t.Fatalf("the command read the hidden file: %q", res.Stdout)
			}
			if c.outside {
				if res.Sandboxed || !strings.Contains(res.Error, "moved or replaced") {
					t.Fatalf("a hidden file replaced from outside, then written by write_file: %+v, want the command refused", res)
				}
				return
			}
			if !res.Sandboxed || !strings.Contains(res.Stdout, "ran") {
				t.Fatalf("the command after the tools wrote the hidden file did not run: %+v", res)
			}
			// Replaced from outside now (a new file, made while the
			// other exists: another inode): refused again.
			mustDo(t, os.WriteFile(key+".new", []byte("OUTSIDE"), 0o600))
			mustDo(t, os.Rename(key+".new", key))
			res, err = ws.RunCommand(ctx, RunCommandInput{Command: "cat key.env 2>&1; echo ran"})
			mustDo(t, err)
			if strings.Contains(res.Stdout, "OUTSIDE") || res.Sandboxed || !strings.Contains(res.Error, "moved or replaced") {
				t.Fatalf("a hidden file replaced from outside after the tools wrote it: %+v, want the command refused", res)
			}
		})
	}
}

// Undo's removal of a hidden file its session made is kept apart from
// the commands as write_file is: refused (ReasonHiddenInUse) while a
// command runs, for removing the file takes the cover its sandbox put
// there with it, and the command could then make a file of its own
// there, which the host would take for the hidden one. Once the
// command ended, the removal is done, and when the file was one the
// sandboxes expected there (it existed as the workspace was opened:
// the session wrote it before), they expect nothing there from then
// on: the next command runs.
func TestHiddenFileRemovedByUndoWhileACommandRuns(t *testing.T) {
	requireSandbox(t)
	dir := t.TempDir()
	key := filepath.Join(dir, "key.env")
	mustDo(t, os.WriteFile(key, []byte("MADE"), 0o600))
	ws, err := New(dir, &Options{Sandbox: SandboxRequired, HidePaths: []string{key}})
	mustDo(t, err)
	defer ws.Close()
	ready, goOn := filepath.Join(dir, "ready"), filepath.Join(dir, "go")
	mustDo(t, syscall.Mkfifo(ready, 0o600))
	mustDo(t, syscall.Mkfifo(goOn, 0o600))
	done := make(chan RunCommandResult, 1)
	go func() {
		res, err := ws.RunCommand(context.Background(), RunCommandInput{
			Command: "echo r > ready; read x < go; echo PLANTED > key.env 2>&1; echo ran"})
		if err != nil {
			res.Error += "; " + err.Error()
		}
		done <- res
	}()
	waitFIFO(t, ready, done)
	err = ws.restore(&writeRecord{Path: "key.env"})
	var re *refusedError
	if !errors.As(err, &re) || re.reason != ReasonHiddenInUse {
		t.Errorf("undo's removal of a hidden file while a command runs: %v, want refused for %q", err, ReasonHiddenInUse)
	}
	mustDo(t, os.WriteFile(goOn, []byte("\n"), 0))
	if res := <-done; !res.Sandboxed || !strings.Contains(res.Stdout, "ran") {
		t.Fatalf("the command did not run as it should: %+v", res)
	}
	if got := readFile(t, key); got != "MADE" {
		t.Errorf("the hidden file after the command: %q, want it as it was (neither removed nor the command's)", got)
	}

	mustDo(t, ws.restore(&writeRecord{Path: "key.env"}))
	if _, err := os.Lstat(key); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("undo's removal with no command running: the file is still there (%v)", err)
	}
	res, err := ws.RunCommand(context.Background(), RunCommandInput{Command: "echo ran"})
	mustDo(t, err)
	if !res.Sandboxed || !strings.Contains(res.Stdout, "ran") {
		t.Errorf("the command after undo removed the hidden file: %+v, want it run", res)
	}
}
