//go:build linux

package workspace

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/workspace/sandbox"
)

// untilNotStarted runs commands on ws until one does not start (the
// first may take the sandbox prepared before the change that makes
// set-ups fail) and returns that result as the model reads it.
func untilNotStarted(t *testing.T, ws *Workspace) (RunCommandResult, string) {
	t.Helper()
	for range 3 {
		res, err := ws.RunCommand(context.Background(), RunCommandInput{Command: "echo ran"})
		mustDo(t, err)
		if !res.Success {
			out, err := json.Marshal(res)
			mustDo(t, err)
			return res, string(out)
		}
	}
	t.Fatal("every command started")
	return RunCommandResult{}, ""
}

// shellGone opens the workspace in mode with a shell, sh in the
// directory in (of base), that is then removed.
func shellGone(mode SandboxMode, in string) func(t *testing.T, base, dir string, logger *slog.Logger) *Workspace {
	return func(t *testing.T, base, dir string, logger *slog.Logger) *Workspace {
		shell := filepath.Join(base, in, "sh")
		mustDo(t, os.MkdirAll(filepath.Dir(shell), 0o755))
		mustDo(t, os.Symlink("/bin/sh", shell))
		ws, err := New(dir, &Options{Sandbox: mode, Shell: shell, Logger: logger})
		mustDo(t, err)
		mustDo(t, os.Remove(shell))
		return ws
	}
}

// What the model reads of a command that could not start names no host
// path outside the workspace: not a configured path to hide (whose
// set-up failed), not where the workspace directory was (it was
// removed), not the host's shell, not a pattern to hide outside the
// workspace that matches too much. It says what happened; the host's
// log keeps the detail, paths included.
func TestRunCommand_StartFailureNamesNoHostPath(t *testing.T) {
	requireSandbox(t)
	for _, c := range []struct {
		name string
		// make opens the workspace in dir (base holds it and what is
		// outside) and brings about the failure.
		make  func(t *testing.T, base, dir string, logger *slog.Logger) *Workspace
		says  []string // in the model's message
		logs  string   // in the host's log: the path the message leaves out
		reach bool     // the failure is a sandbox's: a command ran sandboxed first
	}{{
		name: "a path to hide made a link to the workspace",
		make: func(t *testing.T, base, dir string, logger *slog.Logger) *Workspace {
			ssh := filepath.Join(base, "home", ".ssh")
			ws, err := New(dir, &Options{Sandbox: SandboxRequired, Logger: logger, HidePaths: []string{ssh}})
			mustDo(t, err)
			// Missing when the workspace was opened; now a link that
			// leads to the workspace, which cannot be hidden.
			mustDo(t, os.MkdirAll(filepath.Dir(ssh), 0o755))
			mustDo(t, os.Symlink(dir, ssh))
			return ws
		},
		says: []string{"could not start the command", "path to hide", "never ran"},
		logs: filepath.Join("home", ".ssh"),
	}, {
		name: "the workspace directory removed",
		make: func(t *testing.T, base, dir string, logger *slog.Logger) *Workspace {
			ws, err := New(dir, &Options{Sandbox: SandboxRequired, Logger: logger})
			mustDo(t, err)
			mustDo(t, os.RemoveAll(dir))
			return ws
		},
		says: []string{"could not start the command", "workspace directory", "no longer exists"},
		logs: "ws",
	}, {
		name: "a pattern to hide outside the workspace that matches too many files",
		make: func(t *testing.T, base, dir string, logger *slog.Logger) *Workspace {
			keys := filepath.Join(base, "keys")
			mustDo(t, os.Mkdir(keys, 0o755))
			ws, err := New(dir, &Options{Sandbox: SandboxRequired, Logger: logger,
				HidePaths: []string{filepath.Join(keys, "*.pem")}})
			mustDo(t, err)
			for i := range sandbox.MaxHidden + 1 {
				mustDo(t, os.WriteFile(filepath.Join(keys, strconv.Itoa(i)+".pem"), nil, 0o600))
			}
			return ws
		},
		says: []string{"could not start the command", "outside the workspace", "matches " + strconv.Itoa(sandbox.MaxHidden+1),
			"commands cannot remove them"},
		logs: filepath.Join("keys", "*.pem"),
	}, {
		name: "the shell gone, in the sandbox",
		make: shellGone(SandboxRequired, "ws"),
		says: []string{"could not start the command", "shell", "no such file"},
		logs: filepath.Join("ws", "sh"),
	}, {
		name: "the shell gone, without the sandbox",
		make: shellGone(SandboxOff, "bin"),
		says: []string{"could not start the command", "shell", "no such file"},
		logs: filepath.Join("bin", "sh"),
	}} {
		t.Run(c.name, func(t *testing.T) {
			base := dirOutsideTmp(t) // the sandbox's own /tmp would hide what is beneath the host's
			dir := filepath.Join(base, "ws")
			mustDo(t, os.Mkdir(dir, 0o755))
			var logs lockedBuffer
			logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			ws := c.make(t, base, dir, logger)
			defer ws.Close()
			res, out := untilNotStarted(t, ws)
			if res.Reason != ReasonStartFailed {
				t.Errorf("reason %q, want %q: %s", res.Reason, ReasonStartFailed, out)
			}
			if strings.Contains(out, base) {
				t.Errorf("the model reads a host path (%s): %s", base, out)
			}
			for _, s := range c.says {
				if !strings.Contains(res.Error, s) {
					t.Errorf("the message does not say %q: %s", s, res.Error)
				}
			}
			if !strings.Contains(logs.String(), filepath.Join(base, c.logs)) {
				t.Errorf("the host's log does not name %s:\n%s", filepath.Join(base, c.logs), logs.String())
			}
		})
	}
}
