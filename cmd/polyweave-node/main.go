// Command polyweave-node serves tools to other processes over protoactor
// remote (gRPC): the workspace tools read_file, write_file and run_command,
// confined to the node's own root folder. A host reaches them with
// remote.Client.Tools and uses them like local tools.
//
//	polyweave-node -listen 127.0.0.1:7710 -root /srv/agent-files
//
// Without TLS the node has no authentication: whoever reaches its port can
// read and write files under its root and run commands there. With
// -tls-cert, -tls-key and -tls-ca (PEM files: the node's certificate, its
// key, and the CA certificates its callers' must chain to) it speaks
// mutual TLS (see remote.TLS): only callers with a certificate from those
// CAs reach it, and its clients need ClientOptions.TLS from the same CAs.
// The certificate must name the host of -listen (an IP or DNS subject
// alternative name) and be valid for both server and client
// authentication.
//
//	polyweave-node -listen 10.0.0.7:7710 -allow-remote -root /srv/agent-files \
//		-tls-cert node.crt -tls-key node.key -tls-ca ca.pem
//
// Either way it listens on loopback only (the default, 127.0.0.1 on a free
// port; localhost and [::1] do too) and refuses any other -listen address,
// or a name that resolves beyond loopback, unless -allow-remote is given.
// Without TLS it then warns on stderr: serve beyond loopback without TLS
// only on a network where every peer is trusted, or behind a tunnel that
// authenticates.
//
// A node listening on every interface (-listen 0.0.0.0:7710), or reached
// through NAT or a port forward, names itself by -advertise, the
// host:port its callers reach it at, in the connections it opens to them
// (see remote.NodeOptions.Advertise):
//
//	polyweave-node -listen 0.0.0.0:7710 -advertise 10.0.0.7:7710 -allow-remote ...
//
// -max-frame-bytes bounds one frame the node takes or sends (a call with
// its arguments, a result): see remote.NodeOptions.MaxFrameBytes.
// -max-conns-per-peer and -max-calls-per-caller bound what one peer can
// make the node hold: its connections open at once, and one caller's calls
// in flight (see remote.NodeOptions.MaxConnsPerPeer and
// MaxCallsPerCaller). -held-message-timeout bounds how long the node
// holds a message not yet whole before it closes the connection (see
// remote.NodeOptions.HeldMessageTimeout).
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
	"path/filepath"
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
	advertise := fs.String("advertise", "", "the `host:port` callers reach the node at, when it is not -listen's (a node on 0.0.0.0 or behind NAT): the node names itself by it")
	allowRemote := fs.Bool("allow-remote", false, "allow a -listen address that is not loopback (without TLS the node has no authentication: anyone who reaches it can run commands)")
	tlsCert := fs.String("tls-cert", "", "PEM `file` of the node's TLS certificate, for mutual TLS (with -tls-key and -tls-ca)")
	tlsKey := fs.String("tls-key", "", "PEM `file` of the TLS certificate's private key")
	tlsCA := fs.String("tls-ca", "", "PEM `file` of the CA certificates that callers' certificates must chain to")
	maxFrame := fs.Int("max-frame-bytes", 0, fmt.Sprintf("the largest frame (a call with its arguments, a result) the node takes or sends, in `bytes` (0: %d)", remote.DefaultMaxFrameBytes))
	maxConns := fs.Int("max-conns-per-peer", 0, fmt.Sprintf("the most connections one peer (an IP address) may have open to the node at once (0: %d; negative: no limit)", remote.DefaultMaxConnsPerPeer))
	maxCalls := fs.Int("max-calls-per-caller", 0, fmt.Sprintf("the most calls one caller may have in flight on the node; one more is answered at once with an error (0: %d; negative: no limit)", remote.DefaultMaxCallsPerCaller))
	heldTimeout := fs.Duration("held-message-timeout", 0, fmt.Sprintf("how long the node holds a message not yet whole before it closes its connection (0: %v; negative: no limit)", remote.DefaultHeldMessageTimeout))
	verbose := fs.Bool("v", false, "log to stderr")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: polyweave-node -root DIR [-listen HOST:PORT] [-advertise HOST:PORT] [-allow-remote] [-tls-cert FILE -tls-key FILE -tls-ca FILE] [-max-frame-bytes N] [-max-conns-per-peer N] [-max-calls-per-caller N] [-held-message-timeout D] [-v]")
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
	var tlsOpts *remote.TLS
	if *tlsCert != "" || *tlsKey != "" || *tlsCA != "" {
		if *tlsCert == "" || *tlsKey == "" || *tlsCA == "" {
			fmt.Fprintln(stderr, "polyweave-node: mutual TLS needs all of -tls-cert, -tls-key and -tls-ca")
			return 2
		}
		var err error
		if tlsOpts, err = remote.LoadTLS(*tlsCert, *tlsKey, *tlsCA); err != nil {
			fmt.Fprintln(stderr, "polyweave-node:", err)
			return 2
		}
	}
	if *allowRemote && tlsOpts == nil {
		fmt.Fprintf(stderr, "polyweave-node: WARNING: -allow-remote without TLS: the node has no authentication or encryption: "+
			"anyone who reaches %s can read and write files in %s and run commands there.\n", *listen, *root)
	}
	logger := slog.New(slog.DiscardHandler)
	if *verbose {
		logger = slog.New(slog.NewTextHandler(stderr, nil))
	}
	opts := &remote.NodeOptions{Address: *listen, Advertise: *advertise, Logger: logger, AllowRemote: *allowRemote, TLS: tlsOpts, MaxFrameBytes: *maxFrame,
		MaxConnsPerPeer: *maxConns, MaxCallsPerCaller: *maxCalls, HeldMessageTimeout: *heldTimeout}
	if err := serve(*root, opts, stdout); err != nil {
		if errors.Is(err, remote.ErrAdvertise) {
			fmt.Fprintf(stderr, "polyweave-node: -advertise %s: want a host:port that callers reach the node at (a host, and a port from 1 to 65535).\n", *advertise)
			return 2
		}
		if errors.Is(err, remote.ErrNotLoopback) {
			why := "the node has no authentication or TLS: anyone who reaches it could run commands in " + *root
			if tlsOpts != nil {
				why = "callers with a certificate from -tls-ca could run commands in " + *root + " from other machines"
			}
			fmt.Fprintf(stderr, "polyweave-node: -listen %s is not a loopback address, and %s. Pass -allow-remote to serve there.\n", *listen, why)
			return 2
		}
		fmt.Fprintln(stderr, "polyweave-node:", err)
		return 1
	}
	return 0
}

// serve serves the workspace tools of root with opts (their Tools set
// here) until a signal arrives.
func serve(root string, opts *remote.NodeOptions, stdout io.Writer) (err error) {
	created := missingFolders(root)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	defer func() {
		if err != nil { // a node that did not start leaves no folder it made
			for _, dir := range created {
				_ = os.Remove(dir) // only while empty
			}
		}
	}()
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
	opts.Tools = ts
	node, err := remote.Serve(opts)
	if err != nil {
		return err
	}
	created = nil // it started: the folder is its workspace now
	fmt.Fprintf(stdout, "polyweave-node listening on %s\n", node.Address())
	<-ctx.Done()
	closeCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return node.Close(closeCtx)
}

// missingFolders lists the folders MkdirAll(path) would create, deepest
// first.
func missingFolders(path string) []string {
	var missing []string
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil || !os.IsNotExist(err) {
			return missing
		}
		missing = append(missing, p)
		if filepath.Dir(p) == p {
			return missing
		}
	}
}
