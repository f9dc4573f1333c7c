package tooltest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Child is this test binary run again as a child process, to run one test
// in it that the parent kills (SIGKILL) at a chosen moment: the child
// tells its progress by writing lines ("marks") to file descriptor 3, and
// its stdin stays open until the parent is done with it.
type Child struct {
	cmd    *exec.Cmd
	output bytes.Buffer // the child's stdout and stderr, shown on failure
	marks  *bufio.Reader
	stdin  io.WriteCloser
}

// Marker returns, in a child started by [StartChild], the function that
// sends its parent a mark: one line, formatted as by fmt.Sprintf, that
// the parent reads with [Child.Mark]. Calls from several goroutines are
// written whole, one after the other.
func Marker() func(format string, args ...any) {
	var mu sync.Mutex
	marker := os.NewFile(3, "marker")
	return func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(marker, format+"\n", args...)
	}
}

// StartChild runs the test matching run (e.g. "^TestKillChild$") in a
// child process with env added to this process's environment. The child's
// TMPDIR is a folder of t's, so that what its t.TempDir calls leave behind
// (a child that is killed, or exits without its cleanups, leaves them all)
// is removed with t's own. t's cleanup kills a child still running, waits
// for it and releases its pipes; a child still running after two minutes
// is killed.
func StartChild(t testing.TB, run string, env ...string) *Child {
	t.Helper()
	tmp := t.TempDir() // made before the cleanup below, so removed after it
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	c := &Child{cmd: exec.CommandContext(ctx, os.Args[0], "-test.run="+run, "-test.count=1")}
	c.cmd.Env = append(append(os.Environ(), "TMPDIR="+tmp), env...)
	c.cmd.WaitDelay = 10 * time.Second // a grandchild holding the output pipes
	c.cmd.Stdout, c.cmd.Stderr = &c.output, &c.output
	markR, markW, err := os.Pipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	stdin, err := c.cmd.StdinPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	c.stdin = stdin
	c.cmd.ExtraFiles = []*os.File{markW}
	if err := c.cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	markW.Close()
	c.marks = bufio.NewReader(markR)
	t.Cleanup(func() {
		stdin.Close()
		markR.Close()
		cancel()
		c.cmd.Wait() // reaps it; an error was the test's to report
	})
	return c
}

// Mark returns the child's next mark, without its line end. When the child
// ends without one, it kills the child and fails t with the child's
// output.
func (c *Child) Mark(t testing.TB) string {
	t.Helper()
	got, err := c.marks.ReadString('\n')
	if err != nil {
		c.cmd.Process.Kill()
		c.cmd.Wait()
		t.Fatalf("child: mark %q, %v\n%s", got, err, c.output.String())
	}
	return strings.TrimSpace(got)
}

// Kill kills the child with SIGKILL and fails t unless it died of it.
func (c *Child) Kill(t testing.TB) {
	t.Helper()
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("child: want killed, got %v\n%s", err, c.output.String())
	}
}

// Send writes line (and a line end) to the child's stdin, for a child
// that takes commands there.
func (c *Child) Send(t testing.TB, line string) {
	t.Helper()
	if _, err := io.WriteString(c.stdin, line+"\n"); err != nil {
		t.Fatalf("child: send %q: %v\n%s", line, err, c.output.String())
	}
}

// Stop closes the child's stdin (a child blocked reading it takes that as
// the sign to finish), waits for it to exit and fails t unless it
// succeeded.
func (c *Child) Stop(t testing.TB) {
	t.Helper()
	c.stdin.Close()
	c.Wait(t)
}

// Wait waits for the child to exit and fails t unless it succeeded.
func (c *Child) Wait(t testing.TB) {
	t.Helper()
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("child: %v\n%s", err, c.output.String())
	}
}

// ChildBody is the body of the test that a parent runs as a child (see
// [StartChild]), the mode and folder it is to work in given in the
// environment variables modeEnv and dirEnv. Run in the parent, modeEnv
// unset, it does nothing. In the child it calls run with them and fails
// t on the error run returns.
func ChildBody(t testing.TB, modeEnv, dirEnv string, run func(mode, dir string) error) {
	t.Helper()
	mode := os.Getenv(modeEnv)
	if mode == "" {
		return
	}
	if err := run(mode, os.Getenv(dirEnv)); err != nil {
		t.Fatal(err)
	}
}
