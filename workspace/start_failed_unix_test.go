//go:build unix

package workspace

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A command run without the sandbox whose shell cannot start is answered
// with why it could not, even when the call's deadline has passed by
// then: no sandbox was being set up, and the start was not timed out.
func TestRunCommand_UnsandboxedStartFailureAtTheDeadline(t *testing.T) {
	ws := withShellGone(t, &Options{CommandTimeout: time.Nanosecond})
	res, err := ws.RunCommand(context.Background(), RunCommandInput{Command: "true"})
	if err != nil || res.Success || res.TimedOut || res.Reason != ReasonStartFailed ||
		strings.Contains(res.Error, "its sandbox") || !strings.Contains(res.Error, "no such file") {
		t.Errorf("a command whose shell is gone: %+v, %v; want it answered that its shell could not start, not a timeout", res, err)
	}
}

// withShellGone returns a workspace made with opts, running commands
// without the sandbox, whose shell is gone: every command fails to start.
func withShellGone(t *testing.T, opts *Options) *Workspace {
	t.Helper()
	shell := filepath.Join(t.TempDir(), "sh")
	mustDo(t, os.Symlink("/bin/sh", shell))
	opts.Sandbox, opts.Shell = SandboxOff, shell
	ws, err := New(t.TempDir(), opts)
	mustDo(t, err)
	t.Cleanup(func() { ws.Close() })
	mustDo(t, os.Remove(shell))
	return ws
}

// A command that could not start is logged as a warning, for the host
// (its shell, a path to hide, …), with as much of the command as names
// it: not a whole command of up to MaxCommandBytes, as a model may send,
// on every such call.
func TestRunCommand_StartFailureLogsNoWholeLongCommand(t *testing.T) {
	var logs bytes.Buffer
	ws := withShellGone(t, &Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	command := "echo " + strings.Repeat("x", 64<<10)
	res, err := ws.RunCommand(context.Background(), RunCommandInput{Command: command})
	if err != nil || res.Reason != ReasonStartFailed {
		t.Fatalf("a command whose shell is gone: %+v, %v; want it could not start", res, err)
	}
	if !strings.Contains(logs.String(), "could not start") || !strings.Contains(logs.String(), "echo xxx") {
		t.Errorf("the log does not say which command could not start: %q", logs.String())
	}
	if logs.Len() > 2<<10 {
		t.Errorf("the warning is %d bytes long for a %d-byte command", logs.Len(), len(command))
	}
}
