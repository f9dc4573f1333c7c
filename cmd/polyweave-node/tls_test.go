package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/remote"
	"github.com/polyweave/polyweave-go/remote/tlstest"
	"github.com/polyweave/polyweave-go/tools"
)

// With -tls-cert, -tls-key and -tls-ca the node speaks mutual TLS: a
// client with a certificate from the CA runs its tools. (Package remote's
// tests show that peers without one cannot.)
func TestNode_ServesTLS(t *testing.T) {
	before := quiet()
	root := t.TempDir()
	ca := tlstest.NewCA(t, "polyweave-node test CA")
	node := ca.WriteFiles(t, t.TempDir(), "node")
	p := startNodeProc(t, "-root "+root+" -listen 127.0.0.1:0 -tls-cert "+node.Cert+" -tls-key "+node.Key+" -tls-ca "+node.CA)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	client, gone := newClient(t, remote.ClientOptions{TLS: ca.TLS(t, "client")})
	write := tool(ctx, t, client, p.addr, "write_file")
	if _, err := write(ctx, json.RawMessage(`{"path":"hello.txt","content":"over TLS"}`)); err != nil {
		t.Fatalf("write_file: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "hello.txt")); err != nil || string(b) != "over TLS" {
		t.Errorf("file in the node's root: %q, %v", b, err)
	}
	p.stop(ctx, t, client, gone, before)
}

// The TLS flags go together; a node with them still refuses a -listen
// beyond loopback without -allow-remote, and with it does not warn that it
// has no authentication.
func TestRun_TLSFlags(t *testing.T) {
	root := t.TempDir()
	ca := tlstest.NewCA(t, "polyweave-node test CA")
	node := ca.WriteFiles(t, t.TempDir(), "node")
	tlsFlags := " -tls-cert " + node.Cert + " -tls-key " + node.Key + " -tls-ca " + node.CA
	var out, errOut bytes.Buffer
	if code := run([]string{"-root", root, "-tls-cert", node.Cert}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "-tls-key") {
		t.Errorf("-tls-cert alone: exit %d, stderr %q; want 2, naming the missing flags", code, errOut.String())
	}
	errOut.Reset()
	if code := run([]string{"-root", root, "-tls-cert", node.Cert, "-tls-key", node.Key, "-tls-ca", node.Cert + ".missing"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), ".missing") {
		t.Errorf("a missing -tls-ca file: exit %d, stderr %q; want 2, naming the file", code, errOut.String())
	}
	code, stderr := runChild(t, "-root "+root+" -listen 0.0.0.0:0"+tlsFlags, nil)
	if code != 2 || !strings.Contains(stderr, "not a loopback address") || !strings.Contains(stderr, "-allow-remote") || strings.Contains(stderr, "no authentication") {
		t.Errorf("TLS node beyond loopback: exit %d, stderr %q; want 2 and the refusal, without \"no authentication\"", code, stderr)
	}
	var said string
	code, stderr = runChild(t, "-root "+root+" -listen 0.0.0.0:0 -allow-remote"+tlsFlags, func(cmd *exec.Cmd, out *bufio.Reader) {
		said, _ = out.ReadString('\n')
		_ = cmd.Process.Signal(syscall.SIGTERM)
	})
	if !strings.HasPrefix(said, "polyweave-node listening on ") || code != 0 || strings.Contains(stderr, "WARNING") || strings.Contains(stderr, "no authentication") {
		t.Errorf("TLS node with -allow-remote: said %q, exit %d, stderr %q; want it served without the warning", said, code, stderr)
	}
}

// -max-frame-bytes sets the node's frame limit: a limit the node cannot
// take is refused, and a call over it is not run.
func TestRun_MaxFrameBytes(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"-root", t.TempDir(), "-max-frame-bytes", "-1"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "MaxFrameBytes") {
		t.Errorf("-max-frame-bytes -1: exit %d, stderr %q; want 1 and the limit's error", code, errOut.String())
	}

	before := quiet()
	root := t.TempDir()
	p := startNodeProc(t, "-root "+root+" -listen 127.0.0.1:0 -max-frame-bytes 8192")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	client, gone := newClient(t, remote.ClientOptions{})
	write := tool(ctx, t, client, p.addr, "write_file")
	args, _ := json.Marshal(map[string]string{"path": "big.txt", "content": strings.Repeat("x", 16384)})
	if _, err := write(ctx, args); !errors.Is(err, remote.ErrTooLarge) {
		t.Errorf("a call over the node's 8192-byte limit: %v, want ErrTooLarge", err)
	}
	if _, err := os.Stat(filepath.Join(root, "big.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the call over the limit ran: %v", err)
	}
	p.stop(ctx, t, client, gone, before)
}

// quiet waits (up to leakcheck.Patience) for the goroutines of earlier
// tests' clients to end, and returns the option that ignores those still
// running: a client that starts sets gRPC's global logger, racing with the
// gRPC goroutines of any other in the process.
func quiet() goleak.Option {
	_ = leakcheck.Find()
	return goleak.IgnoreCurrent()
}

// nodeProc is the command running in a child process, serving.
type nodeProc struct {
	cmd    *exec.Cmd
	addr   string
	stderr *bytes.Buffer
}

// startNodeProc runs the command with args and waits until it serves;
// cleanup kills it if it still runs.
func startNodeProc(t *testing.T, args string) *nodeProc {
	t.Helper()
	p := &nodeProc{cmd: exec.Command(os.Args[0], "-test.run=^$"), stderr: new(bytes.Buffer)}
	p.cmd.Env = append(os.Environ(), envRun+"="+args)
	p.cmd.Stderr = p.stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.cmd.Process.Kill() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "polyweave-node listening on ")
	if err != nil || !ok {
		t.Fatalf("node said %q, %v; stderr %q", line, err, p.stderr.String())
	}
	p.addr = addr
	return p
}

// newClient returns a client with opts whose OnNodeGone sends to gone.
func newClient(t *testing.T, opts remote.ClientOptions) (*remote.Client, <-chan string) {
	t.Helper()
	gone := make(chan string, 4)
	opts.OnNodeGone = func(addr string) { gone <- addr }
	c, err := remote.NewClient(&opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c, gone
}

// tool returns the handler of the node's tool name, as client sees it.
func tool(ctx context.Context, t *testing.T, client *remote.Client, addr, name string) tools.HandlerFunc {
	t.Helper()
	ts, err := client.Tools(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range ts {
		if tool.Name() == name {
			return tool.Definition().Handler
		}
	}
	t.Fatalf("no %s among the node's %d tools", name, len(ts))
	return nil
}

// stop stops the node with SIGTERM, then the client once it has seen the
// node go (the pinned protoactor remote races with itself when a peer
// disconnects while it shuts down), and checks that no goroutine is
// left but those before ignores.
func (p *nodeProc) stop(ctx context.Context, t *testing.T, client *remote.Client, gone <-chan string, before goleak.Option) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("node exit after SIGTERM: %v; stderr %q", err, p.stderr.String())
	}
	select {
	case <-gone:
	case <-ctx.Done():
		t.Fatal("the client did not see the node go")
	}
	if err := client.Close(ctx); err != nil {
		t.Fatal(err)
	}
	leakcheck.VerifyNone(t, before)
}
