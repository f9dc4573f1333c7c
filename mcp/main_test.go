package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/mcp"
	"github.com/polyweave/polyweave-go/tools"
)

// serverEnv makes the test binary an MCP stdio server (see stdioServer):
// the importer's tests start it as a real process they can kill.
const serverEnv = "POLYWEAVE_MCP_TEST_SERVER"

// extraEnv names a file: when it exists as the server starts, the server
// offers one more tool, "extra".
const extraEnv = "POLYWEAVE_MCP_TEST_EXTRA"

// hangEnv names a file: when it exists as the server starts, the server
// never answers (see hang).
const hangEnv = "POLYWEAVE_MCP_TEST_HANG"

// hang is a server that never answers, does not end when its input
// does, and ignores SIGTERM: it says "hanging <pid>" on stderr, then
// "SIGTERM" for each it gets, until it is killed.
func hang() {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	fmt.Fprintln(os.Stderr, "hanging", os.Getpid())
	go func() { _, _ = io.Copy(io.Discard, os.Stdin) }()
	for range term {
		fmt.Fprintln(os.Stderr, "SIGTERM")
	}
}

func TestMain(m *testing.M) {
	if os.Getenv(serverEnv) == "1" {
		if f := os.Getenv(hangEnv); f != "" {
			if _, err := os.Stat(f); err == nil {
				hang()
			}
		}
		if err := stdioServer(); err != nil {
			fmt.Fprintln(os.Stderr, "test server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(boundServerEnv) == "1" {
		if err := boundStdioServer(); err != nil {
			fmt.Fprintln(os.Stderr, "test server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	leakcheck.VerifyTestMain(m)
}

// stdioServer serves over stdio: pid (its process id), add (a+b, both
// integers), and block (creates the file it is given, then waits until
// the call is cancelled, and then writes "cancelled" into it), and extra
// when the file $POLYWEAVE_MCP_TEST_EXTRA exists.
func stdioServer() error {
	rt, err := actors.NewRuntime(nil)
	if err != nil {
		return err
	}
	defer rt.Close(context.Background())
	type addIn struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	type blockIn struct {
		File string `json:"file"`
	}
	ts := []*tools.Tool{
		tools.MustNew(tools.Definition{Name: "pid", Description: "Process id of the server", Handler: func(context.Context, json.RawMessage) (any, error) {
			return map[string]int{"pid": os.Getpid()}, nil
		}}),
		tools.MustNewTyped(tools.Definition{Name: "add", Description: "Adds two integers", Idempotent: true},
			func(_ context.Context, in addIn) (string, error) { return fmt.Sprint(in.A + in.B), nil }),
		tools.MustNewTyped(tools.Definition{Name: "block", Description: "Blocks until cancelled", Timeout: tools.NoTimeout},
			func(ctx context.Context, in blockIn) (string, error) {
				if err := os.WriteFile(in.File, nil, 0o600); err != nil {
					return "", err
				}
				<-ctx.Done()
				return "", os.WriteFile(in.File, []byte("cancelled"), 0o600)
			}),
	}
	if f := os.Getenv(extraEnv); f != "" {
		if _, err := os.Stat(f); err == nil {
			ts = append(ts, tools.MustNew(tools.Definition{Name: "extra", Description: "Offered after a restart"}))
		}
	}
	srv, err := mcp.NewServer(rt, &mcp.ServerOptions{Name: "test-server", Tools: ts})
	if err != nil {
		return err
	}
	defer srv.Close(context.Background())
	return srv.ServeStdio(context.Background())
}
