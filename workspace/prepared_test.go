//go:build linux

package workspace

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/polyweave/polyweave-go/workspace/sandbox"
)

// Each command gets a sandbox of its own even though the next one is
// prepared ahead: nothing a command leaves in its /tmp, its host name or
// its processes reaches the next, and a sandbox that was lost while it
// waited is replaced.
func TestRunCommand_PreparedSandboxIsFreshEachTime(t *testing.T) {
	requireSandbox(t)
	ws, err := New(t.TempDir(), &Options{Sandbox: SandboxRequired})
	mustDo(t, err)
	defer ws.Close()
	ctx := context.Background()
	run := func(cmd string) RunCommandResult {
		t.Helper()
		res, err := ws.RunCommand(ctx, RunCommandInput{Command: cmd})
		mustDo(t, err)
		if !res.Sandboxed {
			t.Fatalf("not sandboxed: %+v", res)
		}
		return res
	}
	first := run("echo left > /tmp/mark; hostname changed 2>/dev/null; (sleep 1000 &); ls /proc | grep -c '^[0-9]'")
	if first.ExitCode != 0 {
		t.Fatalf("first command: %+v", first)
	}
	for i := 0; i < 3; i++ {
		mustDo(t, ws.Warm(ctx)) // the next sandbox is ready before the call
		res := run("cat /tmp/mark 2>&1; hostname; ls /proc | grep '^[0-9]' | tr '\\n' ' '")
		if strings.Contains(res.Stdout, "left") || strings.Contains(res.Stdout, "changed") {
			t.Errorf("call %d saw what an earlier one left: %q", i, res.Stdout)
		}
		// The helper (1), the shell and its pipeline: no sleep 1000.
		if pids := strings.Fields(res.Stdout[strings.LastIndexByte(strings.TrimSpace(res.Stdout), '\n')+1:]); len(pids) > 5 {
			t.Errorf("call %d sees processes of an earlier one: %v", i, pids)
		}
	}

	// The prepared sandbox's helper is killed while it waits: the next
	// command gets a new one and runs all the same.
	mustDo(t, ws.Warm(ctx))
	ws.warmMu.Lock()
	h := ws.warm
	ws.warmMu.Unlock()
	if h == nil {
		t.Fatal("Warm returned with no sandbox prepared")
	}
	mustDo(t, h.sb.Cmd.Process.Kill())
	waitExited(t, h.sb.Pid())
	if res := run("echo ok"); res.Stdout != "ok\n" || res.ExitCode != 0 {
		t.Errorf("after the prepared sandbox was lost: %+v", res)
	}
}

// Close releases the sandbox prepared for the next command: no helper
// of this workspace is left running or unreaped.
func TestClose_ReleasesPreparedSandbox(t *testing.T) {
	requireSandbox(t)
	ws, err := New(t.TempDir(), &Options{Sandbox: SandboxRequired})
	mustDo(t, err)
	ctx := context.Background()
	_, err = ws.RunCommand(ctx, RunCommandInput{Command: "true"})
	mustDo(t, err)
	mustDo(t, ws.Warm(ctx))
	ws.warmMu.Lock()
	pid := ws.warm.sb.Pid()
	ws.warmMu.Unlock()
	if !isChild(pid) {
		t.Fatalf("the prepared helper %d is not running", pid)
	}
	mustDo(t, ws.Close())
	if isChild(pid) {
		t.Errorf("the prepared helper %d outlived Close", pid)
	}
	if err := ws.Warm(ctx); err == nil {
		t.Error("Warm after Close succeeded")
	}
}

// waitExited waits until pid has exited (it may stay unreaped).
func waitExited(t *testing.T, pid int) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	mustDo(t, err)
	defer unix.Close(fd)
	for {
		_, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, -1)
		if err != unix.EINTR {
			mustDo(t, err)
			return
		}
	}
}

// isChild reports whether pid exists (running or a zombie) as a child of
// this process.
func isChild(pid int) bool {
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(st, ')')
	f := strings.Fields(string(st[i+1:]))
	return len(f) > 1 && f[1] == strconv.Itoa(os.Getpid())
}

// A command that fails for want of memory under the sandbox's
// address-space limit is reported as stopped by it; one that survives
// the failed allocation, or only talks about memory, is not.
func TestRunCommand_MemoryLimitNamed(t *testing.T) {
	requireSandbox(t)
	ws, err := New(t.TempDir(), &Options{Sandbox: SandboxRequired, Limits: Limits{MaxAddressSpace: 128 << 20}})
	mustDo(t, err)
	defer ws.Close()
	for _, c := range []struct {
		command string
		named   bool
	}{
		{`perl -e '$x = "x" x 300_000_000; print "allocated\n"'`, true},
		{`perl -e '$x = "x" x 300_000_000' || echo recovered`, false},
		{`perl -e '$x = "x" x 30_000_000; print "fits\n"'`, false},
		{`echo "out of memory" >&2; exit 3`, true}, // what it says is all the kernel leaves to go by
		{`echo "out of memory" >&2`, false},
		{`exit 3`, false},
	} {
		res, err := ws.RunCommand(context.Background(), RunCommandInput{Command: c.command})
		mustDo(t, err)
		if got := res.StoppedBy == StoppedByMemoryLimit; got != c.named {
			t.Errorf("%s: stopped by %q (%+v), want memory limit named: %v", c.command, res.StoppedBy, res, c.named)
		}
	}
	off, err := New(t.TempDir(), &Options{Sandbox: SandboxOff})
	mustDo(t, err)
	defer off.Close()
	res, err := off.RunCommand(context.Background(), RunCommandInput{Command: `echo "out of memory" >&2; exit 3`})
	mustDo(t, err)
	if res.StoppedBy != "" {
		t.Errorf("without the sandbox (no memory limit) a failure was put on one: %+v", res)
	}
}

// A command that fails because it could not fork, at the sandbox's
// process limit, is reported as stopped by it.
func TestRunCommand_ProcessLimitNamed(t *testing.T) {
	requireSandbox(t)
	ws, err := New(t.TempDir(), &Options{Sandbox: SandboxRequired, Limits: Limits{MaxProcesses: sandbox.MinProcesses}})
	mustDo(t, err)
	defer ws.Close()
	bomb := `perl -e 'for (1..400) { defined(my $p = fork) or die "fork: $!\n"; if (!$p) { sleep 60; exit } }'`
	res, err := ws.RunCommand(context.Background(), RunCommandInput{Command: bomb})
	mustDo(t, err)
	if res.StoppedBy != StoppedByProcessLimit || res.ExitCode == 0 {
		t.Errorf("fork bomb: stopped by %q: %+v", res.StoppedBy, res)
	}
	res, err = ws.RunCommand(context.Background(), RunCommandInput{Command: `sleep 0 & sleep 0 & wait; exit 4`})
	mustDo(t, err)
	if res.StoppedBy != "" {
		t.Errorf("a few processes and a failure were put on the process limit: %+v", res)
	}
}

// A sandboxed command's answer holds all it wrote, on both streams, and
// nothing is marked cut off or truncated, though the output was more
// than a pipe holds and a process the helper killed held the pipes.
func TestRunCommand_SandboxedOutputComplete(t *testing.T) {
	requireSandbox(t)
	ws, err := New(t.TempDir(), &Options{Sandbox: SandboxRequired})
	mustDo(t, err)
	defer ws.Close()
	res, err := ws.RunCommand(context.Background(), RunCommandInput{
		Command: `sleep 1000 & head -c 200000 /dev/zero | tr '\0' x; printf end >&2`,
	})
	mustDo(t, err)
	if res.ExitCode != 0 || res.Stdout != strings.Repeat("x", 200000) || res.Stderr != "end" ||
		res.StdoutTruncated || res.StderrTruncated {
		t.Errorf("exit %d, %d bytes of stdout (truncated %v), stderr %q (truncated %v)",
			res.ExitCode, len(res.Stdout), res.StdoutTruncated, res.Stderr, res.StderrTruncated)
	}
}

// A call cancelled while it waits for the sandbox being prepared for it
// never starts its command: its one result is that it was cancelled.
func TestRunCommand_CancelledWhileWaitingForSandboxNeverStarts(t *testing.T) {
	requireSandbox(t)
	dir := t.TempDir()
	ws, err := New(dir, &Options{Sandbox: SandboxRequired})
	mustDo(t, err)
	defer ws.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A preparation under way that the call must wait for; it does not
	// end before the call is cancelled.
	ws.warmMu.Lock()
	if ws.warm != nil {
		ws.warm.release()
		ws.warm = nil
	}
	underWay := &preparation{done: make(chan struct{})}
	ws.warming = underWay
	ws.warmMu.Unlock()
	ws.hookWaitPrepared = cancel
	res, err := ws.RunCommand(ctx, RunCommandInput{Command: "echo x > m"})
	if !errors.Is(err, context.Canceled) || res.StoppedBy != StoppedByCancel || res.Success {
		t.Errorf("RunCommand = %+v, %v; want a cancelled call that did not run", res, err)
	}
	if _, serr := os.Stat(filepath.Join(dir, "m")); serr == nil {
		t.Error("the cancelled command ran: it wrote m")
	}
	ws.warmMu.Lock()
	ws.warming = nil
	close(underWay.done)
	ws.warmMu.Unlock()
}

// A path to hide that appears while the next command's sandbox waits,
// prepared (a path missing when the workspace was opened, a pattern's
// first match, both written by write_file), is hidden from that command
// all the same: the workspace sets up another sandbox for it.
func TestRunCommand_PreparedSandboxHidesWhatAppearedMeanwhile(t *testing.T) {
	requireSandbox(t)
	dir := t.TempDir()
	ws, err := New(dir, &Options{Sandbox: SandboxRequired,
		HidePaths: []string{filepath.Join(dir, "later.env"), filepath.Join(dir, "*.pem")}})
	mustDo(t, err)
	defer ws.Close()
	ctx := context.Background()
	mustDo(t, ws.Warm(ctx))
	for _, name := range []string{"later.env", "key.pem"} {
		_, err := ws.WriteFile(ctx, WriteFileInput{Path: name, Content: "SECRET-" + name})
		mustDo(t, err)
	}
	res, err := ws.RunCommand(ctx, RunCommandInput{Command: "cat later.env key.pem; echo ran"})
	mustDo(t, err)
	if strings.Contains(res.Stdout, "SECRET") || !strings.Contains(res.Stdout, "ran") || !res.Sandboxed {
		t.Errorf("the command after the paths to hide were written: %+v", res)
	}
}

// Warm says why the next command's sandbox could not be set up (here
// more paths to hide than a sandbox hides), rather than nothing.
func TestWarm_ReportsAFailedSetUp(t *testing.T) {
	requireFullSandbox(t)
	dir := t.TempDir()
	ws, err := New(dir, &Options{HidePaths: []string{filepath.Join(dir, "k", "*.key")}})
	mustDo(t, err)
	defer ws.Close()
	ctx := context.Background()
	mustDo(t, ws.Warm(ctx))
	// The sandbox made ready by New hid nothing: it is stale now, and
	// the command that takes it prepares another, which fails.
	mustDo(t, os.Mkdir(filepath.Join(dir, "k"), 0o755))
	for i := range sandbox.MaxHidden + 1 {
		mustDo(t, os.WriteFile(filepath.Join(dir, "k", strconv.Itoa(i)+".key"), nil, 0o644))
	}
	res, err := ws.RunCommand(ctx, RunCommandInput{Command: "true"})
	mustDo(t, err)
	if res.Success {
		t.Fatalf("a command ran with more than MaxHidden paths to hide: %+v", res)
	}
	if err := ws.Warm(ctx); !errors.Is(err, sandbox.ErrTooManyHidden) {
		t.Errorf("Warm = %v, want the set-up's failure (ErrTooManyHidden)", err)
	}
}
