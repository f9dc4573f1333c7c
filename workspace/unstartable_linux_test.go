//go:build linux

package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A command no shell can be given (a NUL byte in it, or longer than the
// kernel takes for one argument) is refused before anything starts, as
// an invalid argument that says what is wrong, sandboxed or not: never
// reported as a command that ran and was killed.
func TestRunCommand_UnstartableIsRefused(t *testing.T) {
	cases := []struct {
		name, command, why string
		reason             Reason
	}{
		{"NUL byte", "echo a\x00b", "NUL", ReasonCommandNUL},
		{"200 KiB argument", "echo " + strings.Repeat("x", 200<<10), "long", ReasonCommandTooLong},
		{"over 16 MiB", strings.Repeat("x", 17<<20), "long", ReasonCommandTooLong},
	}
	for _, mode := range []SandboxMode{SandboxAuto, SandboxOff} {
		w, err := New(t.TempDir(), &Options{Sandbox: mode})
		mustDo(t, err)
		sandboxed := w.Protections().Sandbox
		for _, c := range cases {
			res, err := w.RunCommand(context.Background(), RunCommandInput{Command: c.command})
			mustDo(t, err)
			if res.Success || res.Signal != "" || res.ExitCode != 0 || res.StoppedBy != "" || res.Reason != c.reason {
				t.Errorf("%s (sandboxed %v): success=%v exit=%d signal=%q stoppedBy=%q reason=%q, want refused with %q",
					c.name, sandboxed, res.Success, res.ExitCode, res.Signal, res.StoppedBy, res.Reason, c.reason)
			}
			if !strings.Contains(res.Error, c.why) {
				t.Errorf("%s (sandboxed %v): the error does not say what is wrong with the command (%q): %q",
					c.name, sandboxed, c.why, res.Error)
			}
		}
		// The longest command taken runs.
		long := "echo ran #" + strings.Repeat("x", MaxCommandBytes-len("echo ran #"))
		if res, err := w.RunCommand(context.Background(), RunCommandInput{Command: long}); err != nil || res.Stdout != "ran\n" {
			t.Errorf("sandboxed %v: a command of MaxCommandBytes: %+v, %v", sandboxed, res.Reason, err)
		}
		w.Close()
	}
}

// A shell the sandbox hides, or one outside the directories it lets
// commands run programs from, makes New fail saying so, rather than
// every command fail to start.
func TestSandbox_ShellNotRunnableFailsNew(t *testing.T) {
	requireFullSandbox(t)
	tools := dirOutsideTmp(t)
	sh, err := os.ReadFile("/bin/sh")
	mustDo(t, err)
	shell := filepath.Join(tools, "sh")
	mustDo(t, os.WriteFile(shell, sh, 0o755))
	for _, hide := range [][]string{{tools}, nil} {
		w, err := New(t.TempDir(), &Options{Shell: shell, HidePaths: hide})
		if err == nil {
			res, _ := w.RunCommand(context.Background(), RunCommandInput{Command: "echo hi"})
			w.Close()
			t.Errorf("hide %q: New accepted a shell the sandbox cannot run; the command's result: %+v", hide, res)
			continue
		}
		if !strings.Contains(err.Error(), "shell") || !strings.Contains(err.Error(), shell) {
			t.Errorf("hide %q: New's error does not name the shell: %v", hide, err)
		}
	}
}

// A shell that cannot be started when a command runs (here removed
// after New) is a start failure, sandboxed or not: nothing ran, nothing
// was killed.
func TestRunCommand_ShellGoneIsStartFailure(t *testing.T) {
	sh, err := os.ReadFile("/bin/sh")
	mustDo(t, err)
	for _, mode := range []SandboxMode{SandboxAuto, SandboxOff} {
		dir := t.TempDir()
		shell := filepath.Join(dir, "sh")
		mustDo(t, os.WriteFile(shell, sh, 0o755))
		w, err := New(dir, &Options{Sandbox: mode, Shell: shell})
		mustDo(t, err)
		mustDo(t, os.Remove(shell))
		res, err := w.RunCommand(context.Background(), RunCommandInput{Command: "echo hi"})
		w.Close()
		mustDo(t, err)
		if res.Success || res.Signal != "" || res.StoppedBy != "" || res.Reason != ReasonStartFailed {
			t.Errorf("sandboxed %v: %+v, want a start failure", res.Sandboxed, res)
		}
	}
}
