// Command polyweave-mcp serves the workspace tools of a folder —
// read_file, write_file and run_command, confined to the folder — to MCP
// clients (desktop assistants, IDEs, other agent hosts). Each call runs as
// a supervised tool actor: arguments are validated, commands are killed
// with their process group on timeout or cancel, and every call gets one
// result.
//
// By default it speaks MCP over stdio, the way MCP clients run local
// servers:
//
//	polyweave-mcp -dir /path/to/project
//
// With -http it serves streamable HTTP instead, on loopback unless told
// otherwise, refusing foreign Host and Origin headers, and requiring a
// bearer token when -token-env names a variable holding one:
//
//	MCP_TOKEN=... polyweave-mcp -dir . -http 127.0.0.1:8765 -token-env MCP_TOKEN
//
// -allow-remote serves an address beyond loopback, and requires
// -token-env: any host on the network can reach the tools then, and a
// Host header (localhost, say) is what a client claims, not where it is.
// The -http host is accepted as Host besides loopback names; -allow-host
// adds the names clients use when it listens on every interface:
//
//	MCP_TOKEN=... polyweave-mcp -dir . -http 0.0.0.0:8765 -allow-remote -token-env MCP_TOKEN -allow-host build.example
//
// Exit status: 0 when the client disconnected or the process was
// interrupted, 1 on failure, 2 for bad flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/mcp"
	"github.com/polyweave/polyweave-go/workspace"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.As(err, new(*usageError)):
		fmt.Fprintln(os.Stderr, "polyweave-mcp:", err)
		fmt.Fprintln(os.Stderr, "Run 'polyweave-mcp -h' for the flags.")
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "polyweave-mcp:", err)
		os.Exit(1)
	}
}

type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// list is a repeatable string flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

var sandboxModes = map[string]workspace.SandboxMode{
	"auto": workspace.SandboxAuto, "required": workspace.SandboxRequired, "off": workspace.SandboxOff}

type config struct {
	dir            string
	httpAddr       string
	tokenEnv       string
	allowRemote    bool
	allowHosts     list
	allowOrigins   list
	commandTimeout time.Duration
	sandbox        string
	allowNetwork   bool
	verbose        bool
}

func parse(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("polyweave-mcp", flag.ContinueOnError)
	// A bad flag is told once, by main; -h prints the usage below.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&c.dir, "dir", ".", "the folder whose files the tools read and write, and where commands run")
	fs.StringVar(&c.httpAddr, "http", "", "serve streamable HTTP at this address (for example 127.0.0.1:8765; the endpoint is /mcp) instead of stdio")
	fs.StringVar(&c.tokenEnv, "token-env", "", "with -http: require the bearer token held in this environment variable")
	fs.BoolVar(&c.allowRemote, "allow-remote", false, "with -http: allow an address that is not loopback (requires -token-env)")
	fs.Var(&c.allowHosts, "allow-host", "with -http: a Host name to accept besides localhost (repeatable; * for any)")
	fs.Var(&c.allowOrigins, "allow-origin", "with -http: an Origin to accept besides loopback origins (repeatable; * for any)")
	fs.DurationVar(&c.commandTimeout, "command-timeout", workspace.DefaultCommandTimeout, "bound on one run_command call")
	fs.StringVar(&c.sandbox, "sandbox", "auto", "run commands in the sandbox: auto (where the kernel allows it), required (fail without it) or off")
	fs.BoolVar(&c.allowNetwork, "allow-network", false, "give sandboxed commands the host's network (by default they have none)")
	fs.BoolVar(&c.verbose, "v", false, "log to stderr")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "usage: polyweave-mcp [flags]\n\nServes read_file, write_file and run_command for a folder over MCP (stdio by default).")
			fs.SetOutput(stderr)
			fs.PrintDefaults()
			return c, err
		}
		return c, &usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return c, &usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	if c.httpAddr == "" && (c.tokenEnv != "" || c.allowRemote || len(c.allowHosts) > 0 || len(c.allowOrigins) > 0) {
		return c, &usageError{"-token-env, -allow-remote, -allow-host and -allow-origin go with -http"}
	}
	for flag, names := range map[string][]string{"-allow-host": c.allowHosts, "-allow-origin": c.allowOrigins} {
		if slices.ContainsFunc(names, func(n string) bool { return strings.TrimSpace(n) == "" }) {
			return c, &usageError{flag + " is empty: it would accept requests without a name at all"}
		}
	}
	if c.allowRemote && c.tokenEnv == "" {
		return c, &usageError{"-allow-remote needs -token-env naming a variable that holds a bearer token: beyond loopback anyone on the network could run commands otherwise"}
	}
	if _, ok := sandboxModes[c.sandbox]; !ok {
		return c, &usageError{fmt.Sprintf("-sandbox %q: want auto, required or off", c.sandbox)}
	}
	if c.commandTimeout <= 0 {
		return c, &usageError{"-command-timeout must be positive"}
	}
	return c, nil
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	c, err := parse(args, stderr)
	if err != nil {
		return err
	}
	logger := slog.New(slog.DiscardHandler)
	if c.verbose {
		logger = slog.New(slog.NewTextHandler(stderr, nil))
	}
	var token string
	if c.tokenEnv != "" {
		if token = os.Getenv(c.tokenEnv); token == "" {
			return &usageError{fmt.Sprintf("-token-env %s: the variable is empty or unset", c.tokenEnv)}
		}
	}
	dir, err := filepath.Abs(c.dir)
	if err != nil {
		return err
	}
	ws, err := workspace.New(dir, &workspace.Options{CommandTimeout: c.commandTimeout, Logger: logger,
		Sandbox: sandboxModes[c.sandbox], AllowNetwork: c.allowNetwork})
	if err != nil {
		if errors.Is(err, workspace.ErrSystemRoot) { // the library names its option, not a flag
			return &usageError{fmt.Sprintf("-dir %s is a system directory: serve a folder inside it instead", dir)}
		}
		return err
	}
	defer ws.Close()
	ts, err := workspace.Tools(ws)
	if err != nil {
		return err
	}
	rt, err := actors.NewRuntime(&actors.RuntimeOptions{Logger: logger})
	if err != nil {
		return err
	}
	defer rt.Close(context.WithoutCancel(ctx))
	srv, err := mcp.NewServer(rt, &mcp.ServerOptions{Name: "polyweave-workspace", Tools: ts, Logger: logger,
		Instructions: "Tools for the folder " + dir + ": read_file and write_file take paths relative to it, run_command runs sh -c in it."})
	if err != nil {
		return err
	}
	defer srv.Close(context.WithoutCancel(ctx))
	if c.httpAddr == "" {
		err := srv.ServeStdio(ctx)
		if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}
	opts := httpOptions(c, token)
	h, err := srv.ListenHTTP(opts)
	if errors.Is(err, mcp.ErrNotLoopback) {
		return &usageError{fmt.Sprintf("-http %s is not a loopback address: to serve beyond this machine add -allow-remote, and -token-env naming a variable that holds a bearer token", c.httpAddr)}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "polyweave-mcp: serving %s at %s\n", dir, h.URL())
	if c.allowRemote && len(opts.AllowedHosts) == 0 {
		fmt.Fprintln(stderr, "polyweave-mcp: only requests whose Host is a loopback name are accepted: add -allow-host with the name or address clients connect to")
	}
	<-ctx.Done()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = srv.Close(cctx) // ends the sessions, so that open event streams let go
	return h.Close(cctx)
}

// httpOptions are the options of -http. With -allow-remote, the -http
// host, when it names one (not every interface), is a Host clients send:
// it is accepted besides the -allow-host names. The bearer token is
// required then (parse refuses -allow-remote without -token-env), so
// that no client beyond loopback is served without it, whatever Host it
// claims.
func httpOptions(c config, token string) *mcp.HTTPOptions {
	hosts := slices.Clone([]string(c.allowHosts))
	if host, _, err := net.SplitHostPort(c.httpAddr); c.allowRemote && err == nil && host != "" {
		if ip := net.ParseIP(host); (ip == nil || !ip.IsUnspecified()) && !slices.Contains(hosts, host) {
			hosts = append(hosts, host)
		}
	}
	return &mcp.HTTPOptions{Addr: c.httpAddr, AllowRemote: c.allowRemote, BearerToken: token,
		AllowedHosts: hosts, AllowedOrigins: c.allowOrigins}
}
