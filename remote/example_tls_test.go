package remote_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/polyweave/polyweave-go/remote"
	"github.com/polyweave/polyweave-go/tools"
)

// A node on one machine and its client on another, with mutual TLS: each
// has a certificate from the deployment's CA that names the host it
// listens on (10.0.0.7 for the node, 10.0.0.5 for the client), its key,
// and the CA's certificate. Only a client with such a certificate runs the
// node's tools, and only the node answers the client.
func ExampleTLS() {
	// On the node's machine.
	nodeTLS, err := remote.LoadTLS("node.crt", "node.key", "ca.pem")
	if err != nil {
		log.Fatal(err)
	}
	echo := tools.MustNew(tools.Definition{Name: "echo", Sync: true})
	node, err := remote.Serve(&remote.NodeOptions{Address: "10.0.0.7:7710", AllowRemote: true, TLS: nodeTLS, Tools: []*tools.Tool{echo}})
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close(context.Background())

	// On the host's machine.
	clientTLS, err := remote.LoadTLS("client.crt", "client.key", "ca.pem")
	if err != nil {
		log.Fatal(err)
	}
	client, err := remote.NewClient(&remote.ClientOptions{Address: "10.0.0.5:0", AllowRemote: true, TLS: clientTLS})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close(context.Background())
	nodeTools, err := client.Tools(context.Background(), "10.0.0.7:7710")
	if err != nil {
		log.Fatal(err) // a TLS failure is named here, wrapping remote.ErrNodeUnreachable
	}
	fmt.Println(len(nodeTools), "tools")
}

// LoadTLS reads PEM files; a TLS that cannot work is refused with
// ErrTLSConfig, by LoadTLS or by Serve, NewClient and cluster.Start.
func ExampleLoadTLS() {
	_, err := remote.LoadTLS("no-such.crt", "no-such.key", "no-such-ca.pem")
	fmt.Println(errors.Is(err, remote.ErrTLSConfig))
	_, err = remote.NewClient(&remote.ClientOptions{TLS: &remote.TLS{}})
	fmt.Println(errors.Is(err, remote.ErrTLSConfig))
	// Output:
	// true
	// true
}
