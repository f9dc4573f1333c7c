package remote

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	paremote "github.com/asynkron/protoactor-go/remote"
)

// Routes counts the calls n still routes a result for: calls that went to
// a tool and whose result has not gone back to the caller.
func Routes(n *Node) int {
	count := 0
	n.routes.Range(func(any, any) bool { count++; return true })
	return count
}

// Opening returns a channel that receives the address of each peer c
// starts opening a connection to, once Close would name it as still
// connecting (gRPC may connect before that, at the dial).
func Opening(c *Client) <-chan string { return c.dials.notify() }

// NodeOpening is Opening for a node.
func NodeOpening(n *Node) <-chan string { return n.dials.notify() }

func (d *dials) notify() <-chan string {
	ch := make(chan string, 16)
	d.mu.Lock()
	d.counted = func(addr string) {
		select {
		case ch <- addr:
		default:
		}
	}
	d.mu.Unlock()
	return ch
}

// SetClock makes c read the time (for its redial backoff) from now. Call
// it before c's first call.
func SetClock(c *Client, now func() time.Time) { c.actor.now = now }

// Settle returns once c's actor has handled every message sent to it
// before.
func Settle(c *Client) error {
	_, err := c.system.Root.RequestFuture(c.proxy, &actor.Touch{}, 30*time.Second).Result()
	return err
}

// EndIncoming makes c end the incoming connection (a node's, which
// carries its answers) that receives the next message with a frame in it
// (an answer: not the node's watch of c, nor its answer to c's Touch, which
// come when they will), as a connection lost would end: the node's side
// of it sees it end, c's outgoing connections stay open.
func EndIncoming(c *Client) { c.guard.endNext.Store(true) }

// EndNextIncoming makes n end the incoming connection (a caller's, which
// carries its calls) that receives the next message with a frame in it
// (a request), as EndIncoming does for a client.
func EndNextIncoming(n *Node) { n.guard.endNext.Store(true) }

// ReceiveLimit is the largest gRPC message nodes and clients take.
const ReceiveLimit = maxMessageBytes

// StreamsPerConnection is the most streams nodes and clients let one
// connection have open at once.
const StreamsPerConnection = maxConcurrentStreams

// SetHandshakeTimeout makes the server options of g bound a new
// connection's handshake by d instead of HandshakeTimeout. Call it before
// ServerOptions.
func SetHandshakeTimeout(g *Guard, d time.Duration) { g.g.handshake = d }

// SetConnBudget makes the nodes and clients started after it hold at
// most n bytes of messages not yet whole per connection, rather than
// what the receive limit needs (test children only).
func SetConnBudget(n int) { testConnBudget = func(int) int { return n } }

// HoldIncoming makes x (a *Client, *Node or *Guard) hold the first
// message one of its incoming streams reads whose batch carries a message
// of typeName (protoactor's name for its type on the wire), before its
// guard looks at it: held is closed once it is held, and release lets it
// go on. Call it before the message's stream opens.
func HoldIncoming(x any, typeName string) (held <-chan struct{}, release func()) {
	g := guardOf(x)
	h, r := make(chan struct{}), make(chan struct{})
	var once sync.Once
	g.mu.Lock()
	g.hold = func(m *paremote.RemoteMessage) {
		if slices.Contains(m.GetMessageBatch().GetTypeNames(), typeName) {
			once.Do(func() {
				close(h)
				<-r
			})
		}
	}
	g.mu.Unlock()
	return h, sync.OnceFunc(func() { close(r) })
}

// Stopping returns a channel closed once the Close of x (a *Client or
// *Node; StopRemote for a *Guard) has begun to stop its incoming streams
// (see guard.stop).
func Stopping(x any) <-chan struct{} {
	g := guardOf(x)
	ch := make(chan struct{})
	g.mu.Lock()
	g.onStop = sync.OnceFunc(func() { close(ch) })
	g.mu.Unlock()
	return ch
}

// guardOf is the guard of a *Client, *Node or *Guard.
func guardOf(x any) *guard {
	switch x := x.(type) {
	case *Client:
		return x.guard
	case *Node:
		return x.guard
	case *Guard:
		return &x.g
	}
	panic(fmt.Sprintf("remote: no guard in a %T", x))
}

// FailProxySpawn makes the clients started after it fail to spawn their
// actor, with err (test children only). Running returns the names of
// protoactor's remote actors (its endpoints' supervisor, its activator)
// still running in the system of the last client that failed.
func FailProxySpawn(err error) (running func() []string) {
	var system *actor.ActorSystem
	spawnProxy = func(root *actor.RootContext, _ *actor.Props, _ string) (*actor.PID, error) {
		system = root.ActorSystem()
		return nil, err
	}
	return func() []string {
		var names []string
		for _, name := range []string{"EndpointSupervisor", "activator"} {
			if _, ok := system.ProcessRegistry.GetLocal(name); ok {
				names = append(names, name)
			}
		}
		return names
	}
}

// HoldReader holds n's Close as a reader of the results of a tool that
// has not stopped holds it, until release is called.
func HoldReader(n *Node) (release func()) {
	held := make(chan struct{})
	n.read(func() { <-held })
	return sync.OnceFunc(func() { close(held) })
}
