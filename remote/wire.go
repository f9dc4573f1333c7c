package remote

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	paremote "github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc/credentials"
)

// ServiceName is the actor name under which a node serves its tools; a
// node's tools are reached at the PID (node address, ServiceName).
const ServiceName = "polyweave-tools"

// DefaultAddress is where a node or client listens unless told otherwise:
// the loopback interface, on a port the system picks.
const DefaultAddress = "127.0.0.1:0"

// endpointQueueSize is the initial queue of an endpoint writer.
const endpointQueueSize = 1024

// startRemote starts protoactor remote on system, listening on address
// (host:port; port 0 picks a free one), with the message guard installed,
// its incoming connections within l's limits, its connections to peers
// bounded by d, and its gRPC messages bounded for
// frames of up to maxFrame bytes (see withMessageLimits); its server
// speaks TLS with creds, unless nil (see TLS). It returns the remote and
// the address peers reach it at.
func startRemote(system *actor.ActorSystem, address, advertise string, g *guard, l *connLimits, d *dials, maxFrame int, creds credentials.TransportCredentials) (r *paremote.Remote, addr string, err error) {
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return nil, "", fmt.Errorf("remote: address %q: %w", address, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return nil, "", fmt.Errorf("remote: address %q: bad port", address)
	}
	if ip := net.ParseIP(host); ip != nil && ip.To4() == nil {
		host = "[" + host + "]" // the pinned remote joins host and port with a bare colon
	}
	d.events = system.EventStream
	server := append(g.serverOptions(), PingPolicy())
	server = append(server, l.serverOptions(creds)...)
	cfg := paremote.Configure(host, port, paremote.WithServerOptions(server...),
		// The queue of each peer's endpoint writer starts at this many
		// slots and grows as needed; the default, a million, allocates
		// 16 MB for every peer a process talks to.
		paremote.WithEndpointWriterQueueSize(endpointQueueSize),
		paremote.WithDialOptions(d.options()...),
		withMessageLimits(maxFrame))
	if advertise != "" {
		cfg.AdvertisedHost = advertise
	}
	// A peer that cannot be reached is reported (Terminated to its
	// watchers) after one attempt, not after five attempts two seconds
	// apart: calls to a dead node fail fast.
	cfg.MaxRetryCount = 1
	r = paremote.NewRemote(system, cfg)
	defer func() {
		// The pinned remote panics when it cannot listen.
		if p := recover(); p != nil {
			r, addr, err = nil, "", fmt.Errorf("remote: listen on %s: %v", address, p)
		}
	}()
	r.Start()
	g.setSelf(system.Address())
	return r, system.Address(), nil
}

// stopRemote shuts down what startRemote started: the gRPC server (with
// every incoming connection), then, once the incoming streams that g
// guards have ended (nil: none), protoactor's endpoint actors (each
// endpoint writer closes its outgoing connection as it stops). An
// incoming stream may still be delivering a batch when the server has
// stopped, and a delivery may send to a remote actor, which the pinned
// endpoint manager cannot do (it panics) once the endpoints have
// stopped: see guard.stop. It waits for all of this until ctx ends; then
// it returns an error naming the peers (of d, when not nil) still
// connecting, which hold their endpoints up until their connect timeout,
// and the endpoints stop on their own once the streams have ended.
//
// It does not call the remote's Shutdown(true): that clears the endpoint
// manager's connection table while an endpoint that lost its peer may
// still be reading it from another goroutine (a data race in the pinned
// protoactor, hit whenever a peer disconnects during shutdown). Nothing
// here writes that table. The caller must have stopped its own actors that
// send to remote PIDs first.
func stopRemote(ctx context.Context, system *actor.ActorSystem, r *paremote.Remote, g *guard, d *dials) error {
	r.Shutdown(false) // the gRPC server only
	names := []string{"EndpointSupervisor", "activator"}
	stopEndpoints := func() []*actor.Future {
		futures := make([]*actor.Future, len(names))
		for i, name := range names {
			futures[i] = system.Root.StopFuture(actor.NewPID(system.Address(), name))
		}
		return futures
	}
	ended := g.stop()
	select {
	case <-ended:
	default:
		select {
		case <-ended:
		case <-ctx.Done():
			go func() {
				<-ended
				stopEndpoints()
			}()
			return fmt.Errorf("stop protoactor's endpoints: the incoming streams had not all ended (the endpoints stop once they have): %w",
				d.stopError(ctx.Err()))
		}
	}
	var errs []error
	for i, f := range stopEndpoints() {
		err := await(ctx, f)
		switch {
		case err == nil:
		case ctx.Err() != nil && names[i] == "EndpointSupervisor":
			errs = append(errs, fmt.Errorf("stop protoactor's endpoints: %w", d.stopError(err)))
		default:
			errs = append(errs, fmt.Errorf("stop protoactor's %s: %w", names[i], err))
		}
	}
	return errors.Join(errs...)
}

// peerGone tells an actor that the connection to the peer at address has
// ended (or never opened): protoactor's EndpointTerminatedEvent.
type peerGone struct{ address string }

// watchEndpoints sends a peerGone to pid each time a connection of
// system's remote ends. It backs up the watches of peers' actors: a watch
// that reaches the endpoint after its connection failed is never answered
// (the pinned endpoint watcher stops once it has told the watches it had).
// The caller unsubscribes the result when it stops.
func watchEndpoints(system *actor.ActorSystem, pid *actor.PID) *eventstream.Subscription {
	return system.EventStream.SubscribeWithPredicate(func(evt any) {
		system.Root.Send(pid, &peerGone{address: evt.(*paremote.EndpointTerminatedEvent).Address})
	}, func(evt any) bool {
		_, ok := evt.(*paremote.EndpointTerminatedEvent)
		return ok
	})
}

// StopRemote stops a protoactor remote started outside this package (a
// cluster member's) the way nodes and clients stop theirs: the gRPC server
// with its incoming connections, then, once the incoming streams that g
// guards have ended (nil: a remote without a [Guard]), the endpoint
// actors, without the pinned Shutdown(true)'s data race on the connection
// table. A stream that is delivering a batch as the server stops may
// send to remote actors (a watch of an actor that has gone is answered
// so), which the pinned endpoint manager cannot do, and panics, once the
// endpoints have stopped: give it the remote's guard, installed with
// [Guard.ServerOptions]. From then on the guard delivers nothing more.
// Stop the actors that send to remote PIDs first.
func StopRemote(system *actor.ActorSystem, r *paremote.Remote, g *Guard) {
	var gg *guard
	if g != nil {
		gg = &g.g
	}
	_ = stopRemote(context.Background(), system, r, gg, nil)
}
