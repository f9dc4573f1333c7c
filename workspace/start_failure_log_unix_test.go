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
)

// A command that could not start is logged as a warning, for the host
// (its shell, a path to hide, …), with as much of the command as names
// it: not a whole command of up to MaxCommandBytes, as a model may send,
// on every such call.
func TestRunCommand_StartFailureLogsNoWholeLongCommand(t *testing.T) {
	shell := filepath.Join(t.TempDir(), "sh")
	mustDo(t, os.Symlink("/bin/sh", shell))
	var logs bytes.Buffer
	ws, err := New(t.TempDir(), &Options{Sandbox: SandboxOff, Shell: shell,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	mustDo(t, err)
	defer ws.Close()
	mustDo(t, os.Remove(shell)) // the shell is gone: the start fails
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
