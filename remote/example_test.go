package remote_test

import (
	"errors"
	"fmt"

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
