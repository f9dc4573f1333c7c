package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
)

// The command's errors name its flags, not the library's option fields.
func TestRun_ErrorsNameFlags(t *testing.T) {
	defer leakcheck.VerifyNone(t)
	for _, tc := range []struct {
		args       []string
		want       []string
		notOptions string
	}{
		{[]string{"-dir", t.TempDir(), "-http", "0.0.0.0:0"}, []string{"-allow-remote", "-token-env"}, "AllowRemote"},
		{[]string{"-dir", "/usr"}, []string{"-dir /usr is a system directory"}, "AllowSystemRoot"},
	} {
		err := run(context.Background(), tc.args, &bytes.Buffer{})
		var usage *usageError
		if !errors.As(err, &usage) {
			t.Errorf("%v: err = %v, want a usage error", tc.args, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %q lacks %q", tc.args, err, w)
			}
		}
		if strings.Contains(err.Error(), tc.notOptions) {
			t.Errorf("%v: %q names the option field %s", tc.args, err, tc.notOptions)
		}
	}
}

// -allow-remote serves beyond loopback, where a client is anyone on the
// network and a Host header of localhost proves nothing: without
// -token-env it is refused at flag validation, before anything listens.
func TestRun_AllowRemoteNeedsToken(t *testing.T) {
	defer leakcheck.VerifyNone(t)
	for _, args := range [][]string{
		{"-http", "0.0.0.0:0", "-allow-remote"},
		{"-http", "127.0.0.1:0", "-allow-remote"},
		{"-http", "0.0.0.0:0", "-allow-remote", "-allow-host", "*"},
	} {
		refusedBeforeServing(t, args, "-token-env")
	}
}

// refusedBeforeServing runs the command with args (and a fresh -dir) and
// fails t unless it returns a usage error saying says before it serves.
func refusedBeforeServing(t *testing.T, args []string, says string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := newServingWriter()
	done := make(chan error, 1)
	go func() { done <- run(ctx, append([]string{"-dir", t.TempDir()}, args...), stderr) }()
	select {
	case err := <-done:
		var usage *usageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), says) {
			t.Errorf("%v: err = %v, want a usage error saying %q", args, err, says)
		}
	case <-stderr.serving:
		cancel()
		<-done
		t.Errorf("%v: served: %q", args, stderr.String())
	}
}

// servingWriter is run's stderr in a test that waits for it to serve or
// fail: serving is closed once a line says "serving".
type servingWriter struct {
	mu      sync.Mutex
	b       bytes.Buffer
	serving chan struct{}
}

func newServingWriter() *servingWriter { return &servingWriter{serving: make(chan struct{})} }

func (w *servingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	before := strings.Contains(w.b.String(), "serving")
	n, err := w.b.Write(p)
	if !before && strings.Contains(w.b.String(), "serving") {
		close(w.serving)
	}
	return n, err
}

func (w *servingWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// With -allow-remote and -token-env every request needs the token, a
// request that claims a loopback Host as much as any other.
func TestRun_AllowRemoteRequiresTheToken(t *testing.T) {
	defer leakcheck.VerifyNone(t)
	t.Setenv("POLYWEAVE_MCP_TEST_TOKEN", "s3cret")
	ctx, cancel := context.WithCancel(context.Background())
	stderr := newServingWriter()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-dir", t.TempDir(), "-http", "127.0.0.1:0", "-allow-remote", "-token-env", "POLYWEAVE_MCP_TEST_TOKEN"}, stderr)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	select {
	case err := <-done:
		done <- err
		t.Fatalf("run = %v before serving", err)
	case <-stderr.serving:
	}
	_, url, ok := strings.Cut(stderr.String(), " at ")
	if !ok {
		t.Fatalf("no URL in %q", stderr.String())
	}
	url = strings.TrimSpace(strings.SplitN(url, "\n", 2)[0])
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for _, tc := range []struct {
		name, host, auth string
		want             int
	}{
		{"no token", "", "", http.StatusUnauthorized},
		{"no token, Host localhost", "localhost", "", http.StatusUnauthorized},
		{"wrong token, Host localhost", "localhost", "Bearer guess", http.StatusUnauthorized},
		{"token", "", "Bearer s3cret", http.StatusOK},
	} {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(initialize))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tc.host != "" {
			req.Host = tc.host
		}
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
	}
	http.DefaultClient.CloseIdleConnections()
}

// With -allow-remote, the host -http names is a Host clients send, and is
// accepted besides -allow-host's; every interface names none.
func TestHTTPOptions_AcceptTheListenHost(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"-http", "192.0.2.2:8765", "-allow-remote", "-token-env", "T"}, []string{"192.0.2.2"}},
		{[]string{"-http", "[2001:db8::2]:8765", "-allow-remote", "-token-env", "T", "-allow-host", "a.example"}, []string{"a.example", "2001:db8::2"}},
		{[]string{"-http", "build.example:8765", "-allow-remote", "-token-env", "T", "-allow-host", "build.example"}, []string{"build.example"}},
		{[]string{"-http", "0.0.0.0:8765", "-allow-remote", "-token-env", "T"}, nil},
		{[]string{"-http", ":8765", "-allow-remote", "-token-env", "T"}, nil},
		{[]string{"-http", "127.0.0.1:8765"}, nil},
	} {
		c, err := parse(tc.args, io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if got := httpOptions(c, "tok").AllowedHosts; !slices.Equal(got, tc.want) {
			t.Errorf("%v: allowed hosts %q, want %q", tc.args, got, tc.want)
		}
	}
}

// An empty -allow-host or -allow-origin is a usage error: it would
// accept requests without Host or Origin.
func TestRun_EmptyAllowedNameIsAUsageError(t *testing.T) {
	defer leakcheck.VerifyNone(t)
	for _, args := range [][]string{
		{"-http", "127.0.0.1:0", "-allow-host", ""},
		{"-http", "127.0.0.1:0", "-allow-origin", " "},
	} {
		refusedBeforeServing(t, args, "empty")
	}
}

// A bad flag is told once, by main, with a pointer to -h (not the whole
// usage and then the error again); -h prints the usage and succeeds.
func TestRun_BadFlagToldOnce(t *testing.T) {
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"-bogus"}, &stderr)
	var usage *usageError
	if !errors.As(err, &usage) || !strings.Contains(err.Error(), "-bogus") {
		t.Fatalf("err = %v, want a usage error naming -bogus", err)
	}
	if stderr.Len() != 0 {
		t.Errorf("run printed %q before main tells the error", stderr.String())
	}
	stderr.Reset()
	if err := run(context.Background(), []string{"-h"}, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v, want flag.ErrHelp", err)
	}
	if out := stderr.String(); !strings.Contains(out, "usage: polyweave-mcp") || !strings.Contains(out, "-command-timeout") {
		t.Errorf("-h printed %q, want the usage and the flags", out)
	}
}
