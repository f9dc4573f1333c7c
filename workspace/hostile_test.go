//go:build linux

package workspace

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The hostile command suite. Each case runs one command in a host process
// of its own (this test binary again, see runHostileHost), so that a
// command that kills its host kills only that process. The verdict never
// takes the tool's word: it looks at the files outside the workspace, at
// what the command printed, at whether the host exited normally and, in
// /proc, at whether any process carrying the case's marker variable is
// still alive.
//
// The suite runs twice: with the sandbox, where every case must be
// stopped, and without, where the cases the package documentation lists
// as stopped only by the sandbox must do their harm (so the table stays
// true) and the others must be stopped all the same.

const (
	hostileHostEnv = "PW_HOSTILE_HOST" // JSON hostileHostConfig
	hostileCaseEnv = "PW_CASE"         // marker every process of a case inherits
	hostSecretEnv  = "PW_HOST_SECRET"  // a secret in the host's environment only
	leakedFD       = 9                 // where the host leaves a non-close-on-exec descriptor

	// noRaceExitSleep spares a host process the second the race
	// detector sleeps at exit by default.
	noRaceExitSleep = "GORACE=atexit_sleep_ms=0"
)

type hostileHostConfig struct {
	Dir     string        `json:"dir"`
	Command string        `json:"command"`
	Sandbox SandboxMode   `json:"sandbox"`
	Limits  Limits        `json:"limits"`
	Timeout time.Duration `json:"timeout"`
	LeakFD  string        `json:"leakFD"` // a file to open on leakedFD without close-on-exec
}

// runHostileHost is the host process: one workspace, one command, the
// result as JSON on stdout.
func runHostileHost() int {
	var cfg hostileHostConfig
	if err := json.Unmarshal([]byte(os.Getenv(hostileHostEnv)), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if cfg.LeakFD != "" {
		fd, err := syscall.Open(cfg.LeakFD, syscall.O_RDONLY, 0) // no O_CLOEXEC, on purpose
		if err != nil || unix.Dup3(fd, leakedFD, 0) != nil {
			fmt.Fprintln(os.Stderr, "leak fd:", err)
			return 2
		}
	}
	ws, err := New(cfg.Dir, &Options{
		Sandbox:        cfg.Sandbox,
		Limits:         cfg.Limits,
		CommandTimeout: cfg.Timeout,
		KillGrace:      100 * time.Millisecond,
		WaitDelay:      200 * time.Millisecond,
		InheritEnv:     append(slices.Clone(DefaultInheritEnv), hostileCaseEnv),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer ws.Close()
	res, err := ws.RunCommand(context.Background(), RunCommandInput{Command: cfg.Command})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	out, _ := json.Marshal(res)
	os.Stdout.Write(out)
	return 0
}

// hostileCase is one hostile command. offHarm, when not empty, is the harm
// the case does without the sandbox (a row of the package doc's table).
type hostileCase struct {
	name    string
	command func(env hostileEnv) string
	limits  Limits
	timeout time.Duration
	// offTimeout, when set, is the timeout without the sandbox (a case
	// whose harm is running until the timeout need not run long).
	offTimeout time.Duration
	leakFD     bool
	offHarm    string
	// offNeedsRoot: without the sandbox, offHarm happens only when the
	// host runs as root (mounting takes it, outside a user namespace).
	offNeedsRoot bool
	// check reports the case's own harm, beyond the checks every case gets.
	check func(t *testing.T, env hostileEnv, res RunCommandResult) string
}

// hostileEnv is what a case's command and check can refer to.
type hostileEnv struct {
	base, ws, outside string
	secret            string // content of outside/secret.txt
	hostSecret        string // value of hostSecretEnv in the host
	port              int    // a TCP listener in the test process
	id                string
}

// daemonStarted checks that a daemon case got as far as starting it.
func daemonStarted(t *testing.T, e hostileEnv, res RunCommandResult) string {
	if res.Stdout != "started\n" {
		t.Errorf("the daemon did not start: %+v", res)
	}
	return ""
}

// daemon starts a process that records its pid in d.pid and sleeps, in
// the way start says, and waits until it has started. The daemon's shell
// stays (no exec): a process in the middle of exec can show an empty
// /proc/PID/environ, and processesOf, looking right after the call, would
// miss a survivor whose only process was exec'ing sleep just then.
func daemon(start string) func(hostileEnv) string {
	return func(hostileEnv) string {
		return strings.ReplaceAll(start, "DAEMON", `sh -c 'echo $$ > d.pid; sleep 1000' >/dev/null 2>&1`) +
			"\nwhile [ ! -s d.pid ]; do sleep 0.01; done; echo started"
	}
}

var hostileCases = []hostileCase{
	{name: "setsid daemon", check: daemonStarted, command: daemon("setsid DAEMON &"), offHarm: "a process survives the call"},
	{name: "setsid -f daemon", check: daemonStarted, command: daemon("setsid -f DAEMON"), offHarm: "a process survives the call"},
	{name: "setpgid daemon", check: daemonStarted, command: daemon(`perl -e 'setpgrp(0,0); exec @ARGV' DAEMON &`), offHarm: "a process survives the call"},
	{name: "set -m daemon", check: daemonStarted, command: daemon(`bash -c "set -m; DAEMON &"`), offHarm: "a process survives the call"},
	{name: "double-fork daemon", check: daemonStarted, command: daemon("( ( DAEMON & ) & )")},
	{name: "kill -9 $PPID", command: func(hostileEnv) string { return "kill -9 $PPID; sleep 1; echo still here" },
		offHarm: "the host is killed"},
	{name: "read /proc/$PPID/environ", command: func(hostileEnv) string { return "tr '\\0' '\\n' < /proc/$PPID/environ" },
		offHarm: "the host's environment is read"},
	{name: "cd .. and write", command: func(e hostileEnv) string {
		return "cd ..; echo pwned > outside/pwned-relative; cat outside/secret.txt"
	}, offHarm: "files outside are written and read"},
	{name: "absolute-path write", command: func(e hostileEnv) string {
		return fmt.Sprintf("echo pwned > %s/pwned-absolute; echo pwned > /tmp/pw-hostile-%s; cat %s/secret.txt", e.outside, e.id, e.outside)
	}, offHarm: "files outside are written and read"},
	{name: "bind mount", command: func(e hostileEnv) string {
		return fmt.Sprintf("mkdir -p mnt; unshare -m sh -c 'mount --bind %s mnt && echo pwned > mnt/pwned-by-mount; cat mnt/secret.txt'", e.outside)
	}, offHarm: "files outside are written and read", offNeedsRoot: true},
	{name: "network connect", command: func(e hostileEnv) string {
		return fmt.Sprintf("curl -s -m 3 http://127.0.0.1:%d/ || echo no network", e.port)
	}, offHarm: "the network is reached"},
	{name: "inherited descriptor", leakFD: true, command: func(hostileEnv) string { return "cat <&9" },
		offHarm: "a descriptor of the host is read"},
	{name: "fork bomb", limits: Limits{MaxProcesses: 300}, timeout: time.Minute, command: func(hostileEnv) string {
		return `perl -e 'for (1..400) { defined(my $p = fork) or die "fork failed after $_: $!\n"; if (!$p) { sleep 60; exit } } print "started 400\n"'`
	}, offHarm: "400 processes start", check: func(t *testing.T, e hostileEnv, res RunCommandResult) string {
		if strings.Contains(res.Stdout, "started 400") {
			return "400 processes start"
		}
		if !strings.Contains(res.Stderr, "fork failed") {
			t.Errorf("the fork bomb did not fail to fork: %+v", res)
		}
		if res.StoppedBy != StoppedByProcessLimit || !strings.Contains(res.Error, "allows 300") {
			t.Errorf("stopped by %q (%q), want the process limit named", res.StoppedBy, res.Error)
		}
		return ""
	}},
	{name: "memory bomb", limits: Limits{MaxAddressSpace: 128 << 20}, command: func(hostileEnv) string {
		return `perl -e '$x = "x" x 300_000_000; print "allocated\n"'`
	}, offHarm: "300 MB are allocated", check: func(t *testing.T, e hostileEnv, res RunCommandResult) string {
		if strings.Contains(res.Stdout, "allocated") {
			return "300 MB are allocated"
		}
		if res.StoppedBy != StoppedByMemoryLimit || !strings.Contains(res.Error, "128 MiB") {
			t.Errorf("stopped by %q (%q), want the memory limit named", res.StoppedBy, res.Error)
		}
		return ""
	}},
	{name: "set-user-ID copy of sh", command: func(hostileEnv) string {
		return "cp /bin/sh rootsh; chmod 4755 rootsh; chmod g+s rootsh; echo done"
	}, offHarm: "a set-user-ID file is left", check: func(t *testing.T, e hostileEnv, res RunCommandResult) string {
		fi, err := os.Stat(filepath.Join(e.ws, "rootsh"))
		if err != nil {
			t.Errorf("the copy of sh is missing: %v (%+v)", err, res)
			return ""
		}
		if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			return "a set-user-ID file is left"
		}
		return ""
	}},
	{name: "disk bomb", limits: Limits{MaxFileSize: 8 << 20}, command: func(hostileEnv) string {
		return "head -c 50000000 /dev/zero > big; echo wrote"
	}, offHarm: "a 50 MB file is written", check: func(t *testing.T, e hostileEnv, res RunCommandResult) string {
		fi, err := os.Stat(filepath.Join(e.ws, "big"))
		if err == nil && fi.Size() > 8<<20 {
			return "a 50 MB file is written"
		}
		if err == nil && fi.Size() != 8<<20 {
			t.Errorf("big has %d bytes, want the limit", fi.Size())
		}
		return ""
	}},
	{name: "CPU spin", limits: Limits{MaxCPUTime: time.Second}, timeout: time.Minute, offTimeout: time.Second, command: func(hostileEnv) string {
		return "while :; do :; done"
	}, offHarm: "it spins until the timeout", check: func(t *testing.T, e hostileEnv, res RunCommandResult) string {
		if res.TimedOut {
			return "it spins until the timeout"
		}
		if res.StoppedBy != StoppedByCPULimit || res.Signal != "SIGXCPU" {
			t.Errorf("stopped by %q signal %q, want the CPU limit", res.StoppedBy, res.Signal)
		}
		return ""
	}},
	{name: "50 MB of output", command: func(hostileEnv) string { return "head -c 50000000 /dev/zero | tr '\\0' x" },
		check: func(t *testing.T, e hostileEnv, res RunCommandResult) string {
			if !res.StdoutTruncated || len(res.Stdout) != DefaultMaxOutputBytes || res.ExitCode != 0 {
				t.Errorf("stdout %d bytes truncated %v exit %d", len(res.Stdout), res.StdoutTruncated, res.ExitCode)
			}
			return ""
		}},
	{name: "stdin reads", command: func(hostileEnv) string { return `cat; read x; echo "read:$x:"` },
		check: func(t *testing.T, e hostileEnv, res RunCommandResult) string {
			if res.TimedOut || res.Stdout != "read::\n" {
				return "it waits for input"
			}
			return ""
		}},
}

func TestHostileCommands_Sandboxed(t *testing.T) {
	t.Parallel()
	requireFullSandbox(t)
	runHostileSuite(t, SandboxRequired)
}

func TestHostileCommands_Unsandboxed(t *testing.T) {
	t.Parallel()
	runHostileSuite(t, SandboxOff)
}

func runHostileSuite(t *testing.T, mode SandboxMode) {
	// Each case has its own directories, listener, host process and
	// marker, so the cases run in parallel.
	for _, hc := range hostileCases {
		t.Run(hc.name, func(t *testing.T) {
			t.Parallel()
			harms := runHostileCase(t, hc, mode)
			if mode != SandboxOff {
				if len(harms) > 0 {
					t.Errorf("the sandbox did not stop it: %s", strings.Join(harms, "; "))
				}
				return
			}
			offHarm := hc.offHarm
			if hc.offNeedsRoot && os.Geteuid() != 0 {
				offHarm = ""
			}
			switch {
			case offHarm == "" && len(harms) > 0:
				t.Errorf("without the sandbox: %s; the package documentation says only the sandbox's cases do harm", strings.Join(harms, "; "))
			case offHarm != "" && !slices.Contains(harms, offHarm):
				t.Errorf("without the sandbox the harm %q did not happen (got %q): the documented table is wrong", offHarm, harms)
			}
			t.Logf("without the sandbox: %q", harms)
		})
	}
}

// runHostileCase runs hc in a host process and returns the harms it did.
func runHostileCase(t *testing.T, hc hostileCase, mode SandboxMode) []string {
	// Not in /tmp, which the sandbox replaces with a tmpfs of its own:
	// what is outside the workspace must be there for the command to
	// find, wherever TMPDIR points.
	base := dirOutsideTmp(t)
	env := hostileEnv{base: base, ws: filepath.Join(base, "ws"), outside: filepath.Join(base, "outside"),
		secret: "TOPSECRET-" + randomHex(), hostSecret: "HOSTSECRET-" + randomHex(), id: randomHex()}
	mustDo(t, os.Mkdir(env.ws, 0o755))
	mustDo(t, os.Mkdir(env.outside, 0o755))
	writeFile(t, filepath.Join(env.outside, "secret.txt"), env.secret)
	before := snapshot(t, base, env.ws)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	mustDo(t, err)
	env.port = ln.Addr().(*net.TCPAddr).Port
	var connections atomic.Int32
	acceptDone := make(chan struct{})
	go func() {
		defer close(acceptDone)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			connections.Add(1)
			c.Close()
		}
	}()
	defer func() { ln.Close(); <-acceptDone }()

	timeout := hc.timeout
	if timeout == 0 {
		timeout = 20 * time.Second
	}
	if mode == SandboxOff && hc.offTimeout != 0 {
		timeout = hc.offTimeout
	}
	cfg := hostileHostConfig{Dir: env.ws, Command: hc.command(env), Sandbox: mode, Limits: hc.limits, Timeout: timeout}
	if hc.leakFD {
		cfg.LeakFD = filepath.Join(env.outside, "secret.txt")
	}
	cfgJSON, _ := json.Marshal(cfg)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	host := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	host.Env = append(os.Environ(), hostileHostEnv+"="+string(cfgJSON), hostileCaseEnv+"="+env.id, hostSecretEnv+"="+env.hostSecret,
		noRaceExitSleep)
	var stdout, stderr bytes.Buffer
	host.Stdout, host.Stderr = &stdout, &stderr
	hostErr := host.Run()

	var harms []string
	harm := func(h string) {
		if !slices.Contains(harms, h) {
			harms = append(harms, h)
		}
	}
	var res RunCommandResult
	switch {
	case hostErr != nil && strings.Contains(hostErr.Error(), "killed"):
		harm("the host is killed")
	case hostErr != nil:
		t.Fatalf("host: %v\n%s", hostErr, stderr.String())
	default:
		mustDo(t, json.Unmarshal(stdout.Bytes(), &res))
	}
	// Read: a secret in what the command printed or left in the workspace.
	seen := res.Stdout + res.Stderr + contentsUnder(t, env.ws)
	if strings.Contains(seen, env.hostSecret) {
		harm("the host's environment is read")
	}
	if strings.Contains(seen, env.secret) {
		if hc.leakFD {
			harm("a descriptor of the host is read")
		} else {
			harm("files outside are written and read")
		}
	}
	// Changed: anything outside the workspace, in the case's directory or
	// in the host's /tmp.
	after := snapshot(t, base, env.ws)
	if !maps2Equal(before, after) {
		harm("files outside are written and read")
	}
	if _, err := os.Lstat("/tmp/pw-hostile-" + env.id); err == nil {
		os.Remove("/tmp/pw-hostile-" + env.id)
		harm("files outside are written and read")
	}
	if mounted(t, env.ws) {
		harm("a mount appears in the host")
	}
	if connections.Load() > 0 {
		harm("the network is reached")
	}
	if survivors := processesOf(env.id); len(survivors) > 0 {
		harm("a process survives the call")
		for _, pid := range survivors {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if hc.check != nil && hostErr == nil {
		if h := hc.check(t, env, res); h != "" {
			harm(h)
		}
	}
	if mode != SandboxOff && hostErr == nil && !res.Sandboxed {
		t.Errorf("result does not say it was sandboxed: %+v", res)
	}
	return harms
}

func randomHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// snapshot maps every path under base, except beneath skip, to its
// content (directories to "dir", links to their target).
func snapshot(t *testing.T, base, skip string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.Walk(base, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if p == skip {
			return filepath.SkipDir
		}
		switch {
		case fi.IsDir():
			m[p] = "dir"
		case fi.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			m[p] = "link:" + target
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			m[p] = string(b)
		}
		return nil
	})
	mustDo(t, err)
	return m
}

func maps2Equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// contentsUnder concatenates the regular files under dir (small ones).
func contentsUnder(t *testing.T, dir string) string {
	t.Helper()
	var sb strings.Builder
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && fi.Size() < 1<<20 {
			b, _ := os.ReadFile(p)
			sb.Write(b)
		}
		return nil
	})
	return sb.String()
}

// mounted reports whether the host has a mount point at or beneath dir.
func mounted(t *testing.T, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	mustDo(t, err)
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			return true
		}
	}
	return false
}

// processesOf returns the live processes (not zombies, not dying of a
// SIGKILL) whose environment holds the case's marker.
func processesOf(id string) []int {
	marker := []byte(hostileCaseEnv + "=" + id + "\x00")
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(env, marker) {
			continue
		}
		if st, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil {
			if i := bytes.LastIndexByte(st, ')'); i > 0 && i+2 < len(st) && (st[i+2] == 'Z' || st[i+2] == 'X') {
				continue
			}
		}
		if killPending(pid) {
			continue // dying: it runs no more of its code
		}
		pids = append(pids, pid)
	}
	return pids
}

// killPending reports whether pid has a SIGKILL pending, for itself or
// its thread group: it is dying, but may take a moment to exit on a
// loaded machine.
func killPending(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return true // gone
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		name, val, ok := strings.Cut(line, ":")
		if !ok || (name != "SigPnd" && name != "ShdPnd") {
			continue
		}
		mask, err := strconv.ParseUint(strings.TrimSpace(val), 16, 64)
		if err == nil && mask&(1<<(syscall.SIGKILL-1)) != 0 {
			return true
		}
	}
	return false
}

// runAsHost runs this process as the host of one hostile command when the
// test that started it says so (ok), and returns its exit code.
func runAsHost() (code int, ok bool) {
	if os.Getenv(hostileHostEnv) == "" {
		return 0, false
	}
	return runHostileHost(), true
}
