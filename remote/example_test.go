package remote_test

import (
	"errors"
	"fmt"
	"log/slog"

	paremote "github.com/asynkron/protoactor-go/remote"

	"github.com/polyweave/polyweave-go/remote"
	"github.com/polyweave/polyweave-go/tools"
)

// A node listens on loopback unless told otherwise: whoever reaches it runs
// its tools. Serving on every interface needs NodeOptions.AllowRemote (and
// a trusted network).
func ExampleServe_notLoopback() {
	echo := tools.MustNew(tools.Definition{Name: "echo", Sync: true})
	_, err := remote.Serve(&remote.NodeOptions{Address: "0.0.0.0:7710", Tools: []*tools.Tool{echo}})
	fmt.Println(errors.Is(err, remote.ErrNotLoopback))
	// Output: true
}

// A client listens too: nodes send their answers to its address, and
// whoever reaches it can answer its calls. Listening beyond loopback, as a
// client of nodes on other machines must, needs ClientOptions.AllowRemote.
func ExampleNewClient_notLoopback() {
	_, err := remote.NewClient(&remote.ClientOptions{Address: "0.0.0.0:0"})
	fmt.Println(errors.Is(err, remote.ErrNotLoopback))
	// Output: true
}

// A protoactor remote started elsewhere (a cluster member's) gets the
// bounds of the nodes and clients: gRPC messages of up to 64 MiB, and
// batches of frames of its frame limit that fit in one. The option goes
// after the server and dial options, which replace what it adds to.
func ExampleMessageLimits() {
	limits, err := remote.MessageLimits(8 << 20) // frames of up to 8 MiB
	if err != nil {
		panic(err)
	}
	cfg := paremote.Configure("127.0.0.1", 0,
		paremote.WithServerOptions(append(remote.NewGuard(slog.New(slog.DiscardHandler)).ServerOptions(), remote.PingPolicy())...),
		paremote.WithDialOptions(remote.DialOptions(0, 0)...),
		limits)
	fmt.Println("frames per batch:", cfg.EndpointWriterBatchSize)
	_, err = remote.MessageLimits(remote.MaxFrameBytesLimit + 1)
	fmt.Println(err != nil)
	// Output:
	// frames per batch: 7
	// true
}
