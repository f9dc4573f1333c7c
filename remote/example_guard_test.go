package remote_test

import (
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
	paremote "github.com/asynkron/protoactor-go/remote"

	"github.com/polyweave/polyweave-go/remote"
)

// A protoactor remote started elsewhere gets the guard of the nodes and
// clients; once it has started, the guard is told its address, so that
// every envelope that arrives is delivered to this process's actors
// whatever address its target names. StopRemote, given the guard, stops
// the remote once the incoming streams have ended. (Not run: a process
// runs one protoactor remote.)
func ExampleGuard_SetAddress() {
	system := actor.NewActorSystem()
	guard := remote.NewGuard(slog.Default())
	r := paremote.NewRemote(system, paremote.Configure("0.0.0.0", 7720,
		paremote.WithServerOptions(append(guard.ServerOptions(), remote.PingPolicy())...)))
	r.Start()
	defer remote.StopRemote(system, r, guard)
	guard.SetAddress(system.Address()) // [::]:7720, reached at any of the host's addresses
}
