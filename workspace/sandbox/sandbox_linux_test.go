//go:build linux

package sandbox

import (
	"bytes"
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

func defaults(t *testing.T, c Config) Config {
	t.Helper()
	c, err := c.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestProbe(t *testing.T) {
	root, err := os.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	p, err := Probe(defaults(t, Config{}), root)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(p.String())
	if !p.Complete() {
		t.Errorf("incomplete protections on a machine that has them all: %s", p)
	}
}

func TestStart(t *testing.T) {
	dir := t.TempDir()
	out, exit := runIn(t, Config{}, dir, "echo hi > f; id -u; pwd; ls /proc | grep -c '^[0-9]'; ls /proc/self/fd; exit 3")
	t.Logf("out=%q exit=%+v", out, exit)
	if exit.Code != 3 {
		t.Errorf("exit %+v", exit)
	}
	if b, err := os.ReadFile(dir + "/f"); err != nil || string(b) != "hi\n" {
		t.Errorf("f = %q, %v", b, err)
	}
}

// A prepared sandbox reports its protections before it has a command,
// runs exactly one, and a released one is gone.
func TestPrepareRunRelease(t *testing.T) {
	dir := t.TempDir()
	root, null := openRootAndNull(t, dir)
	cfg := defaults(t, Config{})

	unused, err := Prepare(cfg, root, null, null)
	if err != nil {
		t.Fatal(err)
	}
	if prot := unused.Protections(); prot == nil || !prot.Complete() {
		t.Errorf("prepared sandbox protections: %v", prot)
	}
	unused.Release()
	if unused.Cmd.ProcessState == nil || unused.Cmd.ProcessState.Success() {
		t.Errorf("a released sandbox's helper was not killed and reaped: %v", unused.Cmd.ProcessState)
	}

	p, err := Prepare(cfg, root, null, null)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run("/bin/sh", "echo ran > f; exit 7", nil); err != nil {
		t.Fatal(err)
	}
	if err := p.Run("/bin/sh", "echo twice > f", nil); err == nil {
		t.Error("a second Run succeeded")
	}
	exit, err := p.Finish()
	_ = p.Cmd.Wait()
	if err != nil || exit.Code != 7 {
		t.Errorf("exit %+v, %v", exit, err)
	}
	if b, err := os.ReadFile(dir + "/f"); err != nil || string(b) != "ran\n" {
		t.Errorf("f = %q, %v", b, err)
	}
}

// Exited says the helper reported the shell's exit, which it does once
// everything in the sandbox is dead: all the command wrote is then in
// the output pipe, though the pipe has not ended (the helper holds it
// until it exits). A helper killed before the shell exited reports
// nothing, and Exited says so.
func TestExited(t *testing.T) {
	root, err := os.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	cfg := defaults(t, Config{})
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	p, err := Prepare(cfg, root, outW, outW)
	outW.Close()
	if err != nil {
		t.Fatal(err)
	}
	// Less than a pipe holds, so the command need not wait for a reader.
	if err := p.Run("/bin/sh", `sleep 1000 & head -c 50000 /dev/zero | tr '\0' x`, nil); err != nil {
		t.Fatal(err)
	}
	exit, err := p.Finish()
	if err != nil || exit.Code != 0 || !p.Exited() {
		t.Fatalf("exit %+v, %v, exited %v", exit, err, p.Exited())
	}
	fd := int(outR.Fd())
	if err := unix.SetNonblock(fd, true); err != nil {
		t.Fatal(err)
	}
	var out []byte
	buf := make([]byte, 1<<16)
	for {
		n, err := unix.Read(fd, buf)
		if n <= 0 || err != nil {
			break // EAGAIN, or EOF once the helper has exited
		}
		out = append(out, buf[:n]...)
	}
	_ = p.Cmd.Wait()
	if !bytes.Equal(out, bytes.Repeat([]byte("x"), 50000)) {
		t.Errorf("read %d bytes after the report, want 50000 x", len(out))
	}

	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	killed, err := Prepare(cfg, root, null, null)
	if err != nil {
		t.Fatal(err)
	}
	if err := killed.Run("/bin/sh", "sleep 1000", nil); err != nil {
		t.Fatal(err)
	}
	if err := killed.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := killed.Finish(); err == nil || killed.Exited() {
		t.Errorf("a killed helper: Finish error %v, exited %v", err, killed.Exited())
	}
	_ = killed.Cmd.Wait()
}

// A sandbox outlives the thread that started it: host code elsewhere
// may lock a goroutine to its thread and end it, which ends the thread,
// and the sandbox must live on until the host lets it go or dies.
func TestOutlivesStartingThread(t *testing.T) {
	dir := t.TempDir()
	root, null := openRootAndNull(t, dir)
	started := make(chan *Process)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		p, err := Prepare(defaults(t, Config{}), root, null, null)
		if err != nil {
			t.Error(err)
		}
		started <- p
	}()
	p := <-started
	if p == nil {
		return
	}
	// Another locked goroutine forces the runtime to start and end
	// threads, so the one that forked the helper is surely gone.
	for range 20 {
		done := make(chan struct{})
		go func() { runtime.LockOSThread(); close(done) }()
		<-done
	}
	if err := p.Run("/bin/sh", "echo ok > f", nil); err != nil {
		t.Fatal(err)
	}
	exit, err := p.Finish()
	_ = p.Cmd.Wait()
	if err != nil || exit.Code != 0 {
		t.Errorf("the sandbox died with the thread that started it: exit %+v, %v", exit, err)
	}
}

// openRootAndNull opens dir as a sandbox's root, and /dev/null for its
// output; both are closed at the end of the test.
// preparedFor prepares cfg's sandbox of root with a pipe for its output,
// and returns it with the pipe's read end; both go when the test ends.
func preparedFor(t *testing.T, cfg Config, root *os.File) (*Process, *os.File) {
	t.Helper()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { outR.Close() })
	p, err := Prepare(cfg, root, outW, outW)
	outW.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Release)
	return p, outR
}

func openRootAndNull(t *testing.T, dir string) (root, null *os.File) {
	t.Helper()
	root, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	null, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { null.Close() })
	return root, null
}
