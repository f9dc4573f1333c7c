//go:build unix

package workspace

import (
	"context"
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
	shell := filepath.Join(t.TempDir(), "sh")
	mustDo(t, os.Symlink("/bin/sh", shell))
	ws, err := New(t.TempDir(), &Options{Sandbox: SandboxOff, Shell: shell, CommandTimeout: time.Nanosecond})
	mustDo(t, err)
	defer ws.Close()
	mustDo(t, os.Remove(shell)) // the shell is gone: the start fails
	res, err := ws.RunCommand(context.Background(), RunCommandInput{Command: "true"})
	if err != nil || res.Success || res.TimedOut || res.Reason != ReasonStartFailed ||
		strings.Contains(res.Error, "its sandbox") || !strings.Contains(res.Error, "no such file") {
		t.Errorf("a command whose shell is gone: %+v, %v; want it answered that its shell could not start, not a timeout", res, err)
	}
}
