//go:build linux

package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// commandOptions keeps the command tests fast: short timeouts and grace.
func commandOptions() *Options {
	return &Options{CommandTimeout: 10 * time.Second, KillGrace: 100 * time.Millisecond, WaitDelay: 200 * time.Millisecond, Sandbox: SandboxOff}
}

// pidPrefix makes every test command record its shell's pid, which is
// also its process group id, so the test can check the group afterwards.
const pidPrefix = "echo $$ > .pgid; "

func TestRunCommand_HostileCommands(t *testing.T) {
	cases := []struct {
		name    string
		command string
		timeout time.Duration
		check   func(t *testing.T, res RunCommandResult)
	}{
		{
			name:    "background sleep",
			command: "sleep 1000 & echo $! > bg.pid; echo started",
			check:   exitedWith("started\n"),
		},
		{
			name:    "background sleep not holding the pipes",
			command: "sleep 1000 >/dev/null 2>&1 & echo $! > bg.pid",
			check:   func(t *testing.T, res RunCommandResult) { wantExit(t, res, 0, false) },
		},
		{
			name:    "double-forking background child",
			command: "( sleep 1000 & echo $! > bg.pid ) & wait; echo forked",
			check:   exitedWith("forked\n"),
		},
		{
			name:    "child ignoring SIGTERM past the timeout",
			command: "trap '' TERM; sleep 1000 & echo $! > bg.pid; : > " + reachedFile + "; wait",
			timeout: 300 * time.Millisecond,
			check:   func(t *testing.T, res RunCommandResult) { wantExit(t, res, TimeoutExitCode, true) },
		},
		{
			// Output written before the timeout is kept.
			name:    "past its timeout",
			command: "echo partial; : > " + reachedFile + "; sleep 1000",
			timeout: time.Second,
			check: func(t *testing.T, res RunCommandResult) {
				wantExit(t, res, TimeoutExitCode, true)
				if res.Stdout != "partial\n" {
					t.Errorf("stdout %q error %q", res.Stdout, res.Error)
				}
			},
		},
		{
			name:    "100 MB of output",
			command: "head -c 100000000 /dev/zero",
			check: func(t *testing.T, res RunCommandResult) {
				wantExit(t, res, 0, false)
				// A NUL reaches the model as \u0000: six bytes of the cap.
				if !res.StdoutTruncated || len(res.Stdout) != DefaultMaxOutputBytes/6 || res.StderrTruncated {
					t.Errorf("stdout %d bytes truncated=%v", len(res.Stdout), res.StdoutTruncated)
				}
			},
		},
		{
			name:    "output of exactly the cap",
			command: "head -c 1048576 /dev/zero | tr '\\0' x",
			check: func(t *testing.T, res RunCommandResult) {
				wantExit(t, res, 0, false)
				if res.StdoutTruncated || res.Stdout != strings.Repeat("x", DefaultMaxOutputBytes) {
					t.Errorf("stdout %d bytes truncated=%v", len(res.Stdout), res.StdoutTruncated)
				}
			},
		},
		{
			name:    "50 MB on each stream at once",
			command: "head -c 50000000 /dev/zero >&2 & head -c 50000000 /dev/zero; wait",
			check: func(t *testing.T, res RunCommandResult) {
				wantExit(t, res, 0, false)
				if !res.StdoutTruncated || !res.StderrTruncated || len(res.Stdout) != DefaultMaxOutputBytes/6 || len(res.Stderr) != DefaultMaxOutputBytes/6 {
					t.Errorf("stdout %d stderr %d", len(res.Stdout), len(res.Stderr))
				}
			},
		},
		{
			name:    "reads stdin",
			command: "cat; read line || echo eof",
			check:   exitedWith("eof\n"),
		},
		{
			name:    "non-zero exit",
			command: "echo out; echo oops >&2; exit 3",
			check: func(t *testing.T, res RunCommandResult) {
				wantExit(t, res, 3, false)
				if res.Stdout != "out\n" || res.Stderr != "oops\n" {
					t.Errorf("stdout %q stderr %q", res.Stdout, res.Stderr)
				}
			},
		},
		{
			name:    "killed by a signal",
			command: "kill -9 $$",
			check:   func(t *testing.T, res RunCommandResult) { wantExit(t, res, 128+9, false) },
		},
		{
			name:    "invalid UTF-8 output",
			command: `printf 'caf\351\n'`,
			check:   exitedWith("caf\uFFFD\n"),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A case with a timeout is about what the command does once
			// it got somewhere (it then creates reachedFile). On a loaded
			// machine the shell's start can take the whole timeout: that
			// attempt, killed at its timeout all the same, is checked as
			// such, and the case is tried again with twice the timeout.
			timeout := tc.timeout
			for attempt := 1; ; attempt++ {
				dir := t.TempDir()
				opts := commandOptions()
				if timeout != 0 {
					opts.CommandTimeout = timeout
				}
				ws, err := New(dir, opts)
				mustDo(t, err)
				shell := 0
				ws.hookStarted = func(pid int) { shell = pid }
				res, err := ws.RunCommand(t.Context(), RunCommandInput{Command: pidPrefix + tc.command})
				mustDo(t, ws.Close())
				mustDo(t, err)
				if res.Command != pidPrefix+tc.command {
					t.Errorf("command %q", res.Command)
				}
				if _, err := os.Stat(filepath.Join(dir, ".pgid")); err == nil {
					if pgid := readPid(t, dir, ".pgid"); pgid != shell {
						t.Errorf("the shell says its pid is %d, the workspace started %d", pgid, shell)
					}
				}
				assertGroupGone(t, shell)
				if _, err := os.Stat(filepath.Join(dir, "bg.pid")); err == nil {
					assertDead(t, readPid(t, dir, "bg.pid"))
				}
				if timeout != 0 && !strings.Contains(res.Error, "timed out after "+timeout.String()) {
					t.Errorf("error %q; want it timed out after %s", res.Error, timeout)
				}
				if _, err := os.Stat(filepath.Join(dir, reachedFile)); timeout != 0 && errors.Is(err, os.ErrNotExist) {
					wantExit(t, res, TimeoutExitCode, true)
					if attempt == 5 {
						t.Fatalf("the command never got as far as the case is about within %s", timeout)
					}
					t.Logf("the command's start took its %s timeout: trying again with twice that", timeout)
					timeout *= 2
					continue
				}
				tc.check(t, res)
				break
			}
		})
	}
}

// reachedFile is created by a hostile command with a timeout once it has
// got as far as its case is about.
const reachedFile = "reached"

// exitedWith is a check of a command that exited 0, in time, having
// written stdout.
func exitedWith(stdout string) func(*testing.T, RunCommandResult) {
	return func(t *testing.T, res RunCommandResult) {
		t.Helper()
		wantExit(t, res, 0, false)
		if res.Stdout != stdout {
			t.Errorf("stdout %q", res.Stdout)
		}
	}
}

func wantExit(t *testing.T, res RunCommandResult, code int, timedOut bool) {
	t.Helper()
	if !res.Success || res.ExitCode != code || res.TimedOut != timedOut {
		t.Errorf("success=%v exitCode=%d timedOut=%v, want true %d %v (error %q, stderr %q)",
			res.Success, res.ExitCode, res.TimedOut, code, timedOut, res.Error, res.Stderr)
	}
}

func TestRunCommand_EnvironmentAndDirectory(t *testing.T) {
	t.Setenv("POLYWEAVE_TEST_API_KEY", "sk-do-not-leak")
	t.Setenv("SSH_AUTH_SOCK", "/tmp/agent.sock")
	t.Setenv("LANG", "C.UTF-8")
	dir := t.TempDir()
	ws, err := New(dir, commandOptions())
	mustDo(t, err)
	defer ws.Close()
	res, err := ws.RunCommand(t.Context(), RunCommandInput{Command: pidPrefix + "pwd; env"})
	mustDo(t, err)
	wantExit(t, res, 0, false)
	lines := strings.Split(res.Stdout, "\n")
	if lines[0] != dir {
		t.Errorf("cwd %q, want %q", lines[0], dir)
	}
	for _, want := range []string{"HOME=" + dir, "LANG=C.UTF-8", "PATH="} {
		if !strings.Contains(res.Stdout, "\n"+want) {
			t.Errorf("env lacks %q:\n%s", want, res.Stdout)
		}
	}
	for _, leak := range []string{"sk-do-not-leak", "SSH_AUTH_SOCK"} {
		if strings.Contains(res.Stdout, leak) {
			t.Errorf("env leaks %q", leak)
		}
	}
	assertGroupGone(t, readPid(t, dir, ".pgid"))

	ws2, err := New(dir, &Options{InheritEnv: []string{}})
	mustDo(t, err)
	defer ws2.Close()
	res, err = ws2.RunCommand(t.Context(), RunCommandInput{Command: "env"})
	mustDo(t, err)
	if strings.Contains(res.Stdout, "LANG=") || !strings.Contains(res.Stdout, "PATH="+defaultPath) {
		t.Errorf("empty InheritEnv gave:\n%s", res.Stdout)
	}
}

func TestRunCommand_DidNotRun(t *testing.T) {
	ws, err := New(t.TempDir(), commandOptions())
	mustDo(t, err)
	defer ws.Close()
	for _, c := range []string{"", "  \n\t"} {
		res, err := ws.RunCommand(t.Context(), RunCommandInput{Command: c})
		mustDo(t, err)
		if res.Success || res.Reason != ReasonEmptyCommand || res.Error != "run_command: empty command" {
			t.Errorf("command %q: %+v", c, res)
		}
	}
	res, err := ws.RunCommand(t.Context(), RunCommandInput{Command: "echo \x00"})
	mustDo(t, err)
	if res.Success || res.Reason != ReasonCommandNUL || !strings.Contains(res.Error, "NUL") {
		t.Errorf("NUL in command: %+v, want it refused before it starts", res)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := ws.RunCommand(ctx, RunCommandInput{Command: "true"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled before start: %v", err)
	}
}

// A process that leaves the group with setsid is out of reach of the
// group kill; the call still returns once WaitDelay has passed, and says
// the output was cut. The test kills the escaped process itself.
// The note stays within the stderr cap, as the model reads it.
func TestRunCommand_EscapedChildHoldingPipes(t *testing.T) {
	dir := t.TempDir()
	opts := commandOptions()
	opts.MaxOutputBytes = 300
	ws, err := New(dir, opts)
	mustDo(t, err)
	defer ws.Close()
	cmd := pidPrefix + `setsid sh -c 'echo $$ > esc.pid; exec sleep 1000' & while [ ! -s esc.pid ]; do :; done; ` +
		`head -c 1000 /dev/zero | tr '\0' e >&2; echo done`
	res, err := ws.RunCommand(t.Context(), RunCommandInput{Command: cmd})
	mustDo(t, err)
	escaped := readPid(t, dir, "esc.pid")
	mustDo(t, syscall.Kill(escaped, syscall.SIGKILL))
	assertDead(t, escaped)
	wantExit(t, res, 0, false)
	if res.Stdout != "done\n" || !strings.Contains(res.Stderr, "output cut off") || !res.StdoutTruncated || !res.StderrTruncated {
		t.Errorf("stdout %q stderr %q truncated %v %v", res.Stdout, res.Stderr, res.StdoutTruncated, res.StderrTruncated)
	}
	if n := encodedLen(res.Stderr); n > opts.MaxOutputBytes {
		t.Errorf("stderr with the note is %d bytes as the model reads it, past the cap of %d: %q", n, opts.MaxOutputBytes, res.Stderr)
	}
	assertGroupGone(t, readPid(t, dir, ".pgid"))
}

// startBlocked runs a command in the background that signals through a
// FIFO once it is running, then sleeps; it returns when the signal came.
func startBlocked(t *testing.T, ws *Workspace, ctx context.Context) (dir string, done <-chan error) {
	t.Helper()
	dir = ws.Dir()
	fifo := filepath.Join(dir, "ready.fifo")
	mustDo(t, syscall.Mkfifo(fifo, 0o644))
	errc := make(chan error, 1)
	go func() {
		_, err := ws.RunCommand(ctx, RunCommandInput{Command: pidPrefix + "sleep 1000 & echo $! > bg.pid; echo ready > ready.fifo; wait"})
		errc <- err
	}()
	b, err := os.ReadFile(fifo) // blocks until the command has written
	mustDo(t, err)
	if string(b) != "ready\n" {
		t.Fatalf("fifo said %q", b)
	}
	return dir, errc
}

func TestRunCommand_CancelledWhileRunning(t *testing.T) {
	ws, err := New(t.TempDir(), commandOptions())
	mustDo(t, err)
	defer ws.Close()
	ctx, cancel := context.WithCancel(t.Context())
	dir, done := startBlocked(t, ws, ctx)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled run: %v", err)
	}
	assertGroupGone(t, readPid(t, dir, ".pgid"))
	assertDead(t, readPid(t, dir, "bg.pid"))
}

func TestRunCommand_ClosedWhileRunning(t *testing.T) {
	ws, err := New(t.TempDir(), commandOptions())
	mustDo(t, err)
	dir, done := startBlocked(t, ws, t.Context())
	mustDo(t, ws.Close())
	// Close waits for the call, which reaps the shell before it returns.
	pgid := readPid(t, dir, ".pgid")
	if err := syscall.Kill(pgid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("shell %d not reaped when Close returned: kill(0) = %v", pgid, err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Errorf("run during close: %v", err)
	}
	assertGroupGone(t, pgid)
	assertDead(t, readPid(t, dir, "bg.pid"))
}

func TestRunCommandResult_JSON(t *testing.T) {
	cases := []struct {
		res  RunCommandResult
		want string
	}{
		{RunCommandResult{Success: true, Command: "true"}, `{"success":true,"command":"true","stdout":"","exitCode":0}`},
		{RunCommandResult{Success: true, Command: "false", ExitCode: 1}, `{"success":true,"command":"false","stdout":"","stderr":"","exitCode":1}`},
		{RunCommandResult{Success: true, Command: "x", Stdout: "o", Stderr: "w", ExitCode: 0},
			`{"success":true,"command":"x","stdout":"o","stderr":"w","exitCode":0}`},
		{RunCommandResult{Success: true, Command: "sleep 9", ExitCode: 124, TimedOut: true, Error: "command timed out after 1s and was killed"},
			`{"success":true,"command":"sleep 9","stdout":"","stderr":"","exitCode":124,"error":"command timed out after 1s and was killed","timedOut":true}`},
		{RunCommandResult{Error: "run_command: empty command", Reason: ReasonEmptyCommand}, `{"success":false,"error":"run_command: empty command"}`},
	}
	for _, tc := range cases {
		b, err := json.Marshal(tc.res)
		mustDo(t, err)
		if string(b) != tc.want {
			t.Errorf("got  %s\nwant %s", b, tc.want)
		}
	}
}

// readPid reads a pid a test command wrote to name in dir.
func readPid(t *testing.T, dir, name string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	mustDo(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	mustDo(t, err)
	return pid
}

// assertDead waits (bounded) for pid to have exited. A zombie counts as
// exited: orphans are reaped by init, which may take its time. The wait
// is on a pidfd, which becomes readable when the process exits.
func assertDead(t *testing.T, pid int) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return
	}
	mustDo(t, err)
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 5000)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		mustDo(t, err)
		if n == 0 {
			t.Errorf("process %d still alive 5s after the call returned", pid)
		}
		return
	}
}

// assertGroupGone checks that no live process is left in process group
// pgid. A process found there must exit within assertDead's bound: it may
// have been sent SIGKILL and not finished exiting yet.
func assertGroupGone(t *testing.T, pgid int) {
	t.Helper()
	for _, pid := range groupMembers(t, pgid) {
		assertDead(t, pid)
	}
}

// groupMembers lists the processes in group pgid that have not exited
// (zombies have).
func groupMembers(t *testing.T, pgid int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	mustDo(t, err)
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited while we looked
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and ')'.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 3 || fields[0] == "Z" || fields[0] == "X" {
			continue
		}
		if g, _ := strconv.Atoi(fields[2]); g == pgid {
			pids = append(pids, pid)
		}
	}
	return pids
}

// The output cap bounds what the model reads: bytes JSON escapes (a NUL
// is \u0000, six bytes) count as their encoding, and a cut stream says
// so; output within the cap is whole.
func TestRunCommand_OutputCapCountsEncodedSize(t *testing.T) {
	const limit = 1000
	ws, err := New(t.TempDir(), &Options{Sandbox: SandboxOff, MaxOutputBytes: limit})
	mustDo(t, err)
	defer ws.Close()
	res, err := ws.RunCommand(t.Context(), RunCommandInput{Command: "head -c 100000 /dev/zero; head -c 700 /dev/zero >&2"})
	mustDo(t, err)
	for name, s := range map[string]string{"stdout": res.Stdout, "stderr": res.Stderr} {
		b, err := json.Marshal(s)
		mustDo(t, err)
		if len(b)-2 > limit {
			t.Errorf("%s reaches the model as %d bytes of JSON, past the cap of %d", name, len(b)-2, limit)
		}
	}
	if !res.StdoutTruncated || !res.StderrTruncated || len(res.Stdout) != limit/6 {
		t.Errorf("stdout %d NULs, truncated %v/%v; want %d NULs, both cut", len(res.Stdout), res.StdoutTruncated, res.StderrTruncated, limit/6)
	}
	text := strings.Repeat("x", limit)
	res, err = ws.RunCommand(t.Context(), RunCommandInput{Command: "printf %s " + text})
	mustDo(t, err)
	if res.Stdout != text || res.StdoutTruncated {
		t.Errorf("output of exactly the cap: %d bytes, truncated %v", len(res.Stdout), res.StdoutTruncated)
	}
}

func TestCutEncoded(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
		cut  bool
	}{
		{"abc", 3, "abc", false}, {"abcd", 3, "abc", true}, {"a\"b", 3, "a\"", true}, {"a\x00", 6, "a", true},
		{"é\u2028", 8, "é\u2028", false}, {"é\u2028", 7, "é", true}, {"\n\t", 4, "\n\t", false}, {"<&>", 3, "<&>", false},
	} {
		if got, cut := cutEncoded(c.in, c.max); got != c.want || cut != c.cut {
			t.Errorf("cutEncoded(%q, %d) = %q, %v; want %q, %v", c.in, c.max, got, cut, c.want, c.cut)
		}
	}
}
