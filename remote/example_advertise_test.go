//go:build !race

// The example starts a node and a client in this test binary, which runs
// a client of its own already (see envNode): the pinned protoactor sets
// gRPC's global logger at each start, a data race the race detector
// reports. It runs without it.

package remote_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"

	"github.com/polyweave/polyweave-go/remote"
	"github.com/polyweave/polyweave-go/tools"
)

// A node that listens on every interface names itself by the address its
// callers reach it at: Advertise, here loopback's (on a network, the
// machine's own address, or the one a NAT or a port forward gives it).
// Its Address is that one, and its clients reach it there.
func ExampleNodeOptions_advertise() {
	ctx := context.Background()
	l, err := net.Listen("tcp", "0.0.0.0:0") // a free port
	if err != nil {
		panic(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	advertise := net.JoinHostPort("127.0.0.1", port)
	echo := tools.MustNew(tools.Definition{Name: "echo", Sync: true,
		Handler: func(_ context.Context, args json.RawMessage) (any, error) { return args, nil }})
	node, err := remote.Serve(&remote.NodeOptions{
		Address:     net.JoinHostPort("0.0.0.0", port),
		AllowRemote: true, // on a trusted network only: no TLS here
		Advertise:   advertise,
		Tools:       []*tools.Tool{echo},
	})
	if err != nil {
		panic(err)
	}
	defer node.Close(ctx)
	fmt.Println("names itself as advertised:", node.Address() == advertise)

	client, err := remote.NewClient(nil)
	if err != nil {
		panic(err)
	}
	defer client.Close(ctx)
	nodeTools, err := client.Tools(ctx, advertise)
	if err != nil {
		panic(err)
	}
	res, err := nodeTools[0].Definition().Handler(ctx, json.RawMessage(`{"text":"hello"}`))
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s: %s\n", nodeTools[0].Name(), res)
	// Output:
	// names itself as advertised: true
	// echo: {"text":"hello"}
}
