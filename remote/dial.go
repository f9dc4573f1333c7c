package remote

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	paremote "github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	grpckeepalive "google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
)

// DefaultConnectTimeout bounds the opening of a connection to a peer (TCP,
// then gRPC's handshake, then protoactor's) unless the options say
// otherwise.
const DefaultConnectTimeout = 5 * time.Second

// DefaultKeepaliveTime is how long a connection to a peer may stay quiet
// before it is pinged, and DefaultKeepaliveTimeout how long the answer to
// the ping may take before the peer is taken for gone, unless the options
// say otherwise. Nodes ping their callers so too.
const (
	DefaultKeepaliveTime    = 10 * time.Second
	DefaultKeepaliveTimeout = 5 * time.Second
)

// minPingInterval is how often a peer may ping: below gRPC's own floor
// (10 s), so that the pings of any peer are welcome. A server that sees
// pings more often than it allows hangs up on the peer.
const minPingInterval = 5 * time.Second

// dials bounds the connections protoactor opens to peers, and knows which
// are still opening, so that a Close that cannot wait for them can say
// which peers hold it up.
//
// Each of protoactor's endpoint writers opens its connection in its
// Started handler, where nothing else can reach it: the pinned remote
// waits for the stream without a deadline, so a peer that accepts TCP but
// never speaks gRPC holds the writer (and every Close, which waits for the
// writers to stop) until gRPC's own connect deadline, 20 s. The client
// stream interceptor below cancels the stream once timeout passes without
// the peer's first answer.
//
// A connection that fails to open costs the pinned writer two more
// seconds: it sleeps that long after its last attempt (even with one
// attempt, as ours) before it reports the peer gone, and a Close waits for
// the sleep. So a failure to open is handled here instead (see failed):
// the peer is reported gone at once, and the writer ends without the
// sleep.
type dials struct {
	timeout time.Duration                    // <= 0: none of ours
	ping    grpckeepalive.ClientParameters   // Time 0: no pings
	creds   credentials.TransportCredentials // TLS, or none (insecure)
	events  *eventstream.EventStream         // the remote's; set by startRemote

	mu      sync.Mutex
	opening map[string]int                              // peer address → connections opening to it
	counted func(addr string)                           // tests: called once a connection to addr counts as opening
	opened  func(addr string)                           // called once a connection to addr has opened (see onOpen)
	refused func(addr string, err error)                // called once a connection to addr failed to open (see onFailed)
	ended   func(addr string, err error)                // called once a connection to addr that opened ended (see onEnded)
	sent    func(addr string, b *paremote.MessageBatch) // called once gRPC has a batch to addr (see onSent)
}

// onSent makes d call f with a peer's address and each batch of messages
// gRPC has taken to send to it, on the goroutine sending it.
func (d *dials) onSent(f func(addr string, b *paremote.MessageBatch)) {
	d.mu.Lock()
	d.sent = f
	d.mu.Unlock()
}

// onFailed makes d call f with a peer's address and the reason each time
// a connection to the peer fails to open (a TLS handshake refused, say),
// on the goroutine opening it: before the peer is reported gone.
func (d *dials) onFailed(f func(addr string, err error)) {
	d.mu.Lock()
	d.refused = f
	d.mu.Unlock()
}

// onEnded makes d call f with a peer's address and the error each time
// a connection to the peer that had opened ends with one, on the
// goroutine receiving from it: before the peer is reported gone.
func (d *dials) onEnded(f func(addr string, err error)) {
	d.mu.Lock()
	d.ended = f
	d.mu.Unlock()
}

// goAwayReason is what a gRPC client's error err says of the GOAWAY its
// connection received before it closed (its code and debug data: why the
// peer closed it), or "" when there was none.
func goAwayReason(err error) string {
	const prior = "received prior goaway: "
	msg := status.Convert(err).Message()
	if i := strings.Index(msg, prior); i >= 0 {
		return msg[i+len(prior):]
	}
	return ""
}

// onOpen makes d call f with a peer's address each time a connection to
// the peer opens (at the peer's first answer), on the goroutine opening
// it: before anything can report the connection's end.
func (d *dials) onOpen(f func(addr string)) {
	d.mu.Lock()
	d.opened = f
	d.mu.Unlock()
}

// open tells d's onOpen function that a connection to addr has opened.
func (d *dials) open(addr string) {
	d.mu.Lock()
	f := d.opened
	d.mu.Unlock()
	if f != nil {
		f(addr)
	}
}

// newDials returns dials bounded by timeout (0 means
// DefaultConnectTimeout, negative no bound but gRPC's) whose connections
// are pinged as pings says for pingTime and pingTimeout, and secured by
// creds (nil: no TLS).
func newDials(timeout, pingTime, pingTimeout time.Duration, creds credentials.TransportCredentials) *dials {
	if timeout == 0 {
		timeout = DefaultConnectTimeout
	}
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	return &dials{timeout: timeout, ping: pings(pingTime, pingTimeout), creds: creds, opening: map[string]int{}}
}

// pings returns the pings of connections quiet for pingTime, the
// answer awaited for pingTimeout: 0s mean DefaultKeepaliveTime and
// DefaultKeepaliveTimeout (as does a negative pingTimeout); a negative
// pingTime, no pings (Time 0).
func pings(pingTime, pingTimeout time.Duration) grpckeepalive.ClientParameters {
	if pingTime == 0 {
		pingTime = DefaultKeepaliveTime
	}
	if pingTimeout <= 0 {
		pingTimeout = DefaultKeepaliveTimeout
	}
	if pingTime < 0 {
		return grpckeepalive.ClientParameters{}
	}
	return grpckeepalive.ClientParameters{Time: pingTime, Timeout: pingTimeout, PermitWithoutStream: true}
}

// options are the gRPC dial options of the remote: its credentials (TLS,
// or none as protoactor's default), the interceptor, and the pings.
func (d *dials) options() []grpc.DialOption {
	return append(pingDialOptions(d.ping, d.creds), grpc.WithStreamInterceptor(d.intercept))
}

// pingDialOptions are the dial options with creds that ping as ping says
// (none when its Time is 0).
func pingDialOptions(ping grpckeepalive.ClientParameters, creds credentials.TransportCredentials) []grpc.DialOption {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if ping.Time > 0 {
		opts = append(opts, grpc.WithKeepaliveParams(ping))
	}
	return opts
}

// DialOptions returns the gRPC dial options with which the nodes and
// clients of this package connect to their peers, without the parts bound
// to them (the connect timeout), for a protoactor remote started
// elsewhere (a cluster member's): install them with
// remote.WithDialOptions, which replaces protoactor's default (no TLS, as
// these; for mutual TLS, add the dial option of [TLS.GRPCOptions] after
// them). A connection quiet for keepaliveTime is pinged, and its peer is
// gone (its endpoint ends, and the watchers of its actors are told) when
// the answer does not come within keepaliveTimeout, even when the
// connection never closes (a network cut, a frozen process). Zeros mean
// DefaultKeepaliveTime and DefaultKeepaliveTimeout; gRPC pings at most
// every 10 s; a negative keepaliveTime, no pings. The peers must allow
// pings that often ([PingPolicy]): a gRPC server hangs up on a peer that
// pings more often than its policy allows.
func DialOptions(keepaliveTime, keepaliveTimeout time.Duration) []grpc.DialOption {
	return pingDialOptions(pings(keepaliveTime, keepaliveTimeout), insecure.NewCredentials())
}

// PingPolicy returns the gRPC server option with which the nodes and
// clients of this package let their peers ping them as often as
// [DialOptions] do (every 5 s at most, even without a call running), for
// a protoactor remote started elsewhere (a cluster member's): install it
// with remote.WithServerOptions, beside [Guard.ServerOptions]. gRPC's
// default policy hangs up on a peer that pings more often than every 5
// minutes.
func PingPolicy() grpc.ServerOption {
	return grpc.KeepaliveEnforcementPolicy(grpckeepalive.EnforcementPolicy{MinTime: minPingInterval, PermitWithoutStream: true})
}

// intercept counts the stream as opening until the peer's first answer
// (protoactor's connect response), its end, or the timeout, which cancels
// it.
func (d *dials) intercept(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
	streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	addr := cc.Target()
	d.mu.Lock()
	d.opening[addr]++
	counted := d.counted
	d.mu.Unlock()
	if counted != nil {
		counted(addr)
	}
	ctx, cancel := context.WithCancel(ctx)
	var timer *time.Timer
	if d.timeout > 0 {
		timer = time.AfterFunc(d.timeout, cancel)
	}
	opened := sync.OnceFunc(func() {
		if timer != nil {
			timer.Stop()
		}
		d.mu.Lock()
		if d.opening[addr]--; d.opening[addr] <= 0 {
			delete(d.opening, addr)
		}
		d.mu.Unlock()
	})
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		opened()
		cancel()
		panic(d.failed(addr, err))
	}
	return &dialStream{ClientStream: s, d: d, addr: addr, opened: opened, cancel: cancel}, nil
}

// errOpenFailed is the reason an endpoint writer whose connection failed
// to open ends with (see failed).
var errOpenFailed = errors.New("remote: connection to peer failed to open")

// failed reports the failure (err) to open a connection to addr, and
// returns what the caller panics with. It runs on the endpoint writer
// opening the connection, in its Started handler: it reports the peer
// gone (protoactor's EndpointTerminatedEvent, which removes the endpoint
// and tells the watchers of the peer's actors, as the writer would two
// seconds later). The caller's panic then ends the handler without the
// writer's retry sleep: the endpoint supervisor stops a writer that
// panics, and the writer's Stopped handler closes the connection. The
// messages the writer held are dropped, as protoactor drops them when it
// loses a connection: their senders learn it from the peer's going (the
// client's actor and the node's service hear of every endpoint that
// ends).
func (d *dials) failed(addr string, err error) error {
	d.mu.Lock()
	refused := d.refused
	d.mu.Unlock()
	if refused != nil {
		refused(addr, err)
	}
	if d.events != nil {
		d.events.Publish(&paremote.EndpointTerminatedEvent{Address: addr})
	}
	return fmt.Errorf("%w: %s: %w", errOpenFailed, addr, err)
}

// stillOpening returns the addresses of the peers with a connection still
// opening, sorted.
func (d *dials) stillOpening() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]string, 0, len(d.opening))
	for addr := range d.opening {
		out = append(out, addr)
	}
	slices.Sort(out)
	return out
}

// dialStream ends the opening of its stream at the first answer or close,
// and releases its context once the stream has ended. An error before the
// first answer is a failure to open (see dials.failed).
type dialStream struct {
	grpc.ClientStream
	d        *dials
	addr     string
	opened   func()
	cancel   context.CancelFunc
	answered atomic.Bool
}

func (s *dialStream) SendMsg(m any) error {
	err := s.ClientStream.SendMsg(m)
	if err != nil && !s.answered.Load() {
		s.opened()
		s.cancel()
		panic(s.d.failed(s.addr, err))
	}
	if b := sentBatch(m); err == nil && b != nil {
		s.d.mu.Lock()
		sent := s.d.sent
		s.d.mu.Unlock()
		if sent != nil {
			sent(s.addr, b)
		}
	}
	return err
}

// sentBatch is the message batch m carries, if any.
func sentBatch(m any) *paremote.MessageBatch {
	rm, _ := m.(*paremote.RemoteMessage)
	return rm.GetMessageBatch()
}

func (s *dialStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	first := !s.answered.Swap(true)
	s.opened()
	if err != nil {
		s.cancel()
		if first {
			panic(s.d.failed(s.addr, err))
		}
		s.d.mu.Lock()
		ended := s.d.ended
		s.d.mu.Unlock()
		if ended != nil {
			ended(s.addr, err)
		}
		return err
	}
	if first {
		s.d.open(s.addr)
	}
	return nil
}

func (s *dialStream) CloseSend() error {
	s.opened()
	return s.ClientStream.CloseSend()
}

// await waits for f, or until ctx ends.
func await(ctx context.Context, f *actor.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Wait() }() // ends by the future's own timeout at the latest
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stopError says what a stop that ctx cut short (with err) left stopping.
func (d *dials) stopError(err error) error {
	if d == nil {
		return err
	}
	peers := d.stillOpening()
	if len(peers) == 0 {
		return err
	}
	bound := "gRPC's own, 20s"
	if d.timeout > 0 {
		bound = d.timeout.String()
	}
	return fmt.Errorf("still connecting to %s (given up at the connect timeout, %s): %w", strings.Join(peers, ", "), bound, err)
}
