// Command polyweave-node serves tools to other processes over protoactor
// remote (gRPC): the workspace tools read_file, write_file and run_command,
// confined to the node's own root folder. A host reaches them with
// remote.Client.Tools and uses them like local tools.
//
//	polyweave-node -listen 127.0.0.1:7710 -root /srv/agent-files
//
// The node has no authentication and no TLS: whoever reaches its port can
// read and write files under its root and run commands there. It
// therefore listens on loopback only (the default, 127.0.0.1 on a free
// port; localhost and [::1] do too) and refuses any other -listen address,
// or a name that resolves beyond loopback, unless -allow-remote is given,
// and then warns on stderr; serve beyond loopback only on a network
// where every peer is trusted, or behind a tunnel that authenticates.
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
	allowRemote := fs.Bool("allow-remote", false, "allow a -listen address that is not loopback (the node has no authentication: anyone who reaches it can run commands)")
	verbose := fs.Bool("v", false, "log to stderr")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: polyweave-node -root DIR [-listen HOST:PORT] [-allow-remote] [-v]")
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
	if *allowRemote {
		fmt.Fprintf(stderr, "polyweave-node: WARNING: -allow-remote: the node has no authentication or TLS: "+
			"anyone who reaches %s can read and write files in %s and run commands there.\n", *listen, *root)
	}
	logger := slog.New(slog.DiscardHandler)
	if *verbose {
		logger = slog.New(slog.NewTextHandler(stderr, nil))
	}
	if err := serve(*listen, *root, *allowRemote, logger, stdout); err != nil {
		if errors.Is(err, remote.ErrNotLoopback) {
			fmt.Fprintf(stderr, "polyweave-node: -listen %s is not a loopback address, and the node has no authentication or TLS: "+
				"anyone who reaches it could run commands in %s. Pass -allow-remote to serve there anyway (trusted networks only).\n", *listen, *root)
			return 2
		}
		fmt.Fprintln(stderr, "polyweave-node:", err)
		return 1
	}
	return 0
}

func serve(listen, root string, allowRemote bool, logger *slog.Logger, stdout io.Writer) error {
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
	node, err := remote.Serve(&remote.NodeOptions{Address: listen, Tools: ts, Logger: logger, AllowRemote: allowRemote})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "polyweave-node listening on %s\n", node.Address())
	<-ctx.Done()
	closeCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return node.Close(closeCtx)
}
