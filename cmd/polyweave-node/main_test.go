package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/remote"
)

// The test binary runs as the command when envRun holds its arguments.
const envRun = "POLYWEAVE_NODE_TEST_ARGS"

func TestMain(m *testing.M) {
	if args := os.Getenv(envRun); args != "" {
		os.Exit(run(strings.Fields(args), os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func TestRun_Flags(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(nil, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "-root") {
		t.Errorf("no -root: exit %d, stderr %q", code, errOut.String())
	}
	if code := run([]string{"-root", t.TempDir(), "extra"}, &out, &errOut); code != 2 {
		t.Errorf("extra argument: exit %d", code)
	}
	if code := run([]string{"-h"}, &out, &errOut); code != 0 {
		t.Errorf("-h: exit %d", code)
	}
	if code := run([]string{"-root", t.TempDir(), "-listen", "nonsense"}, &out, &errOut); code != 1 {
		t.Errorf("bad -listen: exit %d", code)
	}
}

// The node process serves its workspace tools to a host over the wire and
// stops cleanly on SIGTERM.
func TestNode_ServesWorkspace(t *testing.T) {
	root := t.TempDir()
	rt := actorstest.NewRuntime(t, nil)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRun+"=-root "+root+" -listen 127.0.0.1:0")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "polyweave-node listening on ")
	if err != nil || !ok {
		t.Fatalf("node said %q, %v", line, err)
	}

	gone := make(chan string, 1)
	client, err := remote.NewClient(&remote.ClientOptions{OnNodeGone: func(addr string) { gone <- addr }})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	ts, err := client.Tools(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range ts {
		names = append(names, tool.Name())
	}
	if strings.Join(names, ",") != "read_file,write_file,run_command" {
		t.Fatalf("node tools %v", names)
	}
	write, err := rt.Start(ts[1].Spec())
	if err != nil {
		t.Fatal(err)
	}
	if err := write.Send(messages.ToolCall("s", "w", "write_file", json.RawMessage(`{"path":"hello.txt","content":"over the wire"}`))); err != nil {
		t.Fatal(err)
	}
	f, err := write.Recv(ctx)
	if err != nil || f.IsErrorResult() {
		t.Fatalf("write_file: %v %s", err, f.GetPayload())
	}
	if b, err := os.ReadFile(filepath.Join(root, "hello.txt")); err != nil || string(b) != "over the wire" {
		t.Errorf("file in the node's root: %q, %v", b, err)
	}
	// Stop the node first and close the client once it has seen the node
	// go: the pinned protoactor remote races with itself when a peer
	// disconnects while it shuts down.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("node exit after SIGTERM: %v", err)
	}
	select {
	case <-gone:
	case <-ctx.Done():
		t.Fatal("the client did not see the node go")
	}
	if err := client.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// runChild runs the command (this test binary) with args and returns its
// exit code, stdout and stderr; a command still running after 30 s is
// killed and fails the test.
func runChild(t *testing.T, args string, stop func(*exec.Cmd, *bufio.Reader)) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRun+"="+args)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if stop != nil {
			stop(cmd, bufio.NewReader(stdout))
		}
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("polyweave-node %s still ran after 30 s; stderr %q", args, errOut.String())
	}
	return cmd.ProcessState.ExitCode(), errOut.String()
}

// The node has no authentication: it refuses to listen beyond loopback
// unless told to, and says why.
func TestRun_RefusesNonLoopback(t *testing.T) {
	root := t.TempDir()
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		code, errOut := runChild(t, "-root "+root+" -listen "+addr, nil)
		if code != 2 || !strings.Contains(errOut, "not a loopback address") || !strings.Contains(errOut, "-allow-remote") {
			t.Errorf("-listen %s: exit %d, stderr %q; want 2 and the refusal", addr, code, errOut)
		}
	}
}

// With -allow-remote it serves on every interface, and warns that anyone
// reaching it can run commands.
func TestRun_AllowRemoteWarns(t *testing.T) {
	root := t.TempDir()
	var said string
	code, errOut := runChild(t, "-root "+root+" -listen 0.0.0.0:0 -allow-remote", func(cmd *exec.Cmd, out *bufio.Reader) {
		said, _ = out.ReadString('\n')
		_ = cmd.Process.Signal(syscall.SIGTERM)
	})
	if !strings.HasPrefix(said, "polyweave-node listening on ") {
		t.Errorf("node said %q (stderr %q)", said, errOut)
	}
	if code != 0 || !strings.Contains(errOut, "WARNING") || !strings.Contains(errOut, "no authentication") {
		t.Errorf("exit %d, stderr %q; want 0 and a warning", code, errOut)
	}
}

// With -advertise a node on every interface names itself by the address
// given: it says it listens there. A -advertise that is not a host:port
// callers can reach is a bad flag.
func TestRun_Advertise(t *testing.T) {
	root := t.TempDir()
	var said string
	code, errOut := runChild(t, "-root "+root+" -listen 0.0.0.0:0 -allow-remote -advertise 127.0.0.1:7710", func(cmd *exec.Cmd, out *bufio.Reader) {
		said, _ = out.ReadString('\n')
		_ = cmd.Process.Signal(syscall.SIGTERM)
	})
	if said != "polyweave-node listening on 127.0.0.1:7710\n" || code != 0 {
		t.Errorf("node said %q, exit %d (stderr %q); want it named by -advertise", said, code, errOut)
	}
	code, errOut = runChild(t, "-root "+root+" -advertise 127.0.0.1", nil)
	if code != 2 || !strings.Contains(errOut, "-advertise 127.0.0.1") {
		t.Errorf("-advertise without a port: exit %d, stderr %q; want 2 naming the flag", code, errOut)
	}
}

// A node that fails to start leaves no -root folder it created: "created
// if missing" is for a node that serves.
func TestRun_FailedStartLeavesNoRoot(t *testing.T) {
	root := filepath.Join(t.TempDir(), "a", "files")
	var out, errOut bytes.Buffer
	if code := run([]string{"-root", root, "-listen", "nonsense"}, &out, &errOut); code != 1 {
		t.Fatalf("bad -listen: exit %d, stderr %q", code, errOut.String())
	}
	for _, dir := range []string{root, filepath.Dir(root)} {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s is left after a failed start (stat: %v)", dir, err)
		}
	}
	// A folder that was there before stays.
	kept := t.TempDir()
	if code := run([]string{"-root", kept, "-listen", "nonsense"}, &out, &errOut); code != 1 {
		t.Fatalf("bad -listen: exit %d", code)
	}
	if _, err := os.Stat(kept); err != nil {
		t.Errorf("the existing root is gone: %v", err)
	}
}
