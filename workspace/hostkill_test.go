//go:build linux

package workspace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// hostKillCommand tells the test it runs (through a FIFO), then waits for
// the file "go" and makes its side effect.
const hostKillCommand = `echo running > ready.fifo; while [ ! -e go ]; do sleep 0.01; done; echo done > effect`

// startHostKillHost starts a host process running hostKillCommand in a
// new workspace and returns once the command runs. The marker variable
// identifies the command's processes in /proc.
func startHostKillHost(t testing.TB, mode SandboxMode) (host *exec.Cmd, ws, id string) {
	t.Helper()
	ws = filepath.Join(t.TempDir(), "ws")
	mustDo(t, os.Mkdir(ws, 0o755))
	mustDo(t, syscall.Mkfifo(filepath.Join(ws, "ready.fifo"), 0o644))
	id = randomHex()
	cfg, _ := json.Marshal(hostileHostConfig{Dir: ws, Command: hostKillCommand, Sandbox: mode, Timeout: time.Minute})
	host = exec.Command(os.Args[0], "-test.run=^$")
	host.Env = append(os.Environ(), hostileHostEnv+"="+string(cfg), hostileCaseEnv+"="+id)
	startReadyHost(t, host, ws, id, nil)
	return host, ws, id
}

// startReadyHost starts host, which runs hostKillCommand in ws (its
// processes named by id: see processesOf), has t's cleanup kill host and
// them, and waits until the command says it runs (in ws's ready.fifo).
// What host wrote to out, unless nil, is shown if it does not.
func startReadyHost(t testing.TB, host *exec.Cmd, ws, id string, out *bytes.Buffer) {
	t.Helper()
	mustDo(t, host.Start())
	t.Cleanup(func() {
		_ = host.Process.Kill()
		_ = host.Wait()
		for _, pid := range processesOf(id) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	f, err := os.Open(filepath.Join(ws, "ready.fifo")) // blocks until the command opens it
	mustDo(t, err)
	line, err := bufio.NewReader(f).ReadString('\n')
	f.Close()
	if err != nil || line != "running\n" {
		var output string
		if out != nil {
			output = "\n" + out.String()
		}
		t.Fatalf("the command said %q, %v%s", line, err, output)
	}
}

// Killing the host (SIGKILL: no chance to clean up) kills a sandboxed
// command with it. The time until no process of the command is left is
// measured by polling /proc; the side effect the command would make next
// never happens.
func TestHostKilled_SandboxedCommandDies(t *testing.T) {
	requireSandbox(t)
	host, ws, id := startHostKillHost(t, SandboxRequired)
	gone := killAndTimeDeaths(t, host, id)
	_ = host.Wait()
	// How soon is a speed goal (at most 100 ms), measured by
	// BenchmarkHostKilled_SandboxedCommandGone: a loaded machine can
	// delay any process's exit, so the test asserts only that the
	// processes die (killAndTimeDeaths fails after 10 s) and that the
	// command's next step never happens.
	t.Logf("the command's processes were gone %s after the host died", gone)
	mustDo(t, os.WriteFile(filepath.Join(ws, "go"), nil, 0o644))
	if _, err := os.Stat(filepath.Join(ws, "effect")); !os.IsNotExist(err) {
		t.Errorf("the side effect happened after the host was killed: %v", err)
	}
}

// BenchmarkHostKilled_SandboxedCommandGone measures how long a sandboxed
// command outlives its host after SIGKILL: from the host's exit until no
// process of the command is left (the goal is at most 100 ms). It reports
// the median and the slowest of the b.N kills as ms-gone-median and
// ms-gone-max; each kill starts a host process and a sandbox, so run it
// with -benchtime=Nx.
func BenchmarkHostKilled_SandboxedCommandGone(b *testing.B) {
	requireSandbox(b)
	var gone []time.Duration
	for range b.N {
		host, _, id := startHostKillHost(b, SandboxRequired)
		gone = append(gone, killAndTimeDeaths(b, host, id))
		_ = host.Wait()
	}
	slices.Sort(gone)
	b.ReportMetric(float64(gone[len(gone)/2])/1e6, "ms-gone-median")
	b.ReportMetric(float64(gone[len(gone)-1])/1e6, "ms-gone-max")
	b.ReportMetric(0, "ns/op")
}

// Without the sandbox the same command runs on after its host was killed
// and makes its side effect: the row of the package doc's table.
func TestHostKilled_UnsandboxedCommandRunsOn(t *testing.T) {
	host, ws, id := startHostKillHost(t, SandboxOff)
	mustDo(t, host.Process.Kill())
	_ = host.Wait()
	if len(processesOf(id)) == 0 {
		t.Fatal("the unsandboxed command died with its host; the package doc says it runs on")
	}
	// The side effect is a line written into a FIFO the test holds open
	// for reading and writing (so that reads wait for data, not for a
	// writer): the read returns when the orphan writes, or at the deadline.
	effect := filepath.Join(ws, "effect")
	mustDo(t, syscall.Mkfifo(effect, 0o644))
	f, err := os.OpenFile(effect, os.O_RDWR, 0)
	mustDo(t, err)
	defer f.Close()
	mustDo(t, f.SetReadDeadline(time.Now().Add(30*time.Second)))
	mustDo(t, os.WriteFile(filepath.Join(ws, "go"), nil, 0o644))
	buf := make([]byte, 16)
	n, err := f.Read(buf)
	if err != nil {
		t.Fatalf("the orphaned command made no side effect: %v", err)
	}
	if got := string(buf[:n]); got != "done\n" {
		t.Fatalf("side effect %q, want %q", got, "done\n")
	}
}

// requireSandbox skips t, saying what is missing, unless this machine
// gives the full sandbox.
func requireSandbox(t testing.TB) {
	t.Helper()
	ws, err := New(t.TempDir(), nil)
	mustDo(t, err)
	defer ws.Close()
	if prot := ws.Protections(); !prot.Complete() {
		t.Skipf("this kernel does not give the full sandbox: %s", prot)
	}
}

// killAndTimeDeaths SIGKILLs host and returns how long after the host's
// death every process of the command (found in /proc by the marker id)
// has exited. It holds pidfds on the host and on each process, taken
// before the kill, and polls them, so the time is the kernel's, not that
// of scanning /proc. Time is counted from the host's exit, not from the
// signal: tearing down a large host (a race-detector binary) can take a
// while, and the command's death can only follow it. /proc is checked
// again at the end.
func killAndTimeDeaths(t testing.TB, host *exec.Cmd, id string) time.Duration {
	t.Helper()
	pids := processesOf(id)
	if len(pids) == 0 {
		t.Fatal("no process of the command found in /proc while it runs")
	}
	var fds []unix.PollFd
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // already gone
		}
		defer unix.Close(fd)
		fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	}
	hostFD, err := unix.PidfdOpen(host.Process.Pid, 0)
	mustDo(t, err)
	defer unix.Close(hostFD)
	mustDo(t, host.Process.Kill())
	killed := time.Now()
	for {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(hostFD), Events: unix.POLLIN}}, 10_000)
		if err == unix.EINTR {
			continue
		}
		mustDo(t, err)
		if n == 0 {
			t.Fatal("the host did not die within 10 s of SIGKILL")
		}
		break
	}
	hostDead := time.Now()
	t.Logf("the host exited %s after SIGKILL", hostDead.Sub(killed))
	for len(fds) > 0 {
		if _, err := unix.Poll(fds, 10_000); err != nil && err != unix.EINTR {
			t.Fatal(err)
		}
		if time.Since(killed) > 10*time.Second {
			t.Fatalf("processes of the command still alive 10 s after the host was killed: %v", processesOf(id))
		}
		fds = slices.DeleteFunc(fds, func(p unix.PollFd) bool { return p.Revents != 0 })
	}
	gone := time.Since(hostDead)
	if left := processesOf(id); len(left) > 0 {
		t.Errorf("processes of the command alive after their pidfds said they exited: %v", left)
	}
	return gone
}
