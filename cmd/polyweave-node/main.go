// Command polyweave-node serves tools to other processes over protoactor
// remote (gRPC): the workspace tools read_file, write_file and run_command,
// confined to the node's own root folder. A host reaches them with
// remote.Client.Tools and uses them like local tools.
//
//	polyweave-node -listen 127.0.0.1:7710 -root /srv/agent-files
//
// Once it serves, it prints "polyweave-node listening on HOST:PORT" on
// stdout. SIGINT or SIGTERM stops it: calls in flight are answered
// "stopped" before it exits.
//
// To serve tools of your own, build a node of your own with
// remote.Serve and the *tools.Tool values you register in it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/polyweave/polyweave-go/remote"
	"github.com/polyweave/polyweave-go/workspace"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run serves until a signal arrives and returns the exit status: 0 after a
// clean stop, 1 when serving failed, 2 for bad flags.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("polyweave-node", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", remote.DefaultAddress, "`host:port` to serve on (port 0 picks a free one)")
	root := fs.String("root", "", "the workspace `folder` the tools are confined to (required; created if missing)")
	verbose := fs.Bool("v", false, "log to stderr")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: polyweave-node -root DIR [-listen HOST:PORT] [-v]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *root == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	logger := slog.New(slog.DiscardHandler)
	if *verbose {
		logger = slog.New(slog.NewTextHandler(stderr, nil))
	}
	if err := serve(*listen, *root, logger, stdout); err != nil {
		fmt.Fprintln(stderr, "polyweave-node:", err)
		return 1
	}
	return 0
}

func serve(listen, root string, logger *slog.Logger, stdout io.Writer) error {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	ws, err := workspace.New(root, nil)
	if err != nil {
		return err
	}
	defer ws.Close()
	ts, err := workspace.Tools(ws)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	node, err := remote.Serve(&remote.NodeOptions{Address: listen, Tools: ts, Logger: logger})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "polyweave-node listening on %s\n", node.Address())
	<-ctx.Done()
	closeCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return node.Close(closeCtx)
}
