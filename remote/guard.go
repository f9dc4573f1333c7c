package remote

import (
	"context"
	"log/slog"
	"math/bits"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	paremote "github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/polyweave/polyweave-go/messages"
)

// The pinned protoactor remote trusts what arrives: its endpoint reader
// looks the type name of every message up in the protobuf registry and
// dereferences the result unchecked, and indexes its lookup tables with the
// numbers the sender chose. A message of a type this binary does not know
// (a newer peer, a stray client) crashes the whole receiving process.
//
// guard is a gRPC stream interceptor on the remote server that checks each
// incoming message batch before the endpoint reader sees it and removes the
// envelopes it could not handle: an unknown serializer, a type name that is
// not registered in this binary, or an index outside the batch's tables.
// The rest of the batch is delivered.
//
// The pinned Remoting service also has two unary methods, ListProcesses
// and GetProcessDiagnostics, whose handlers panic ("implement me"), and
// gRPC does not recover a handler's panic: one call from whoever reaches
// the port would end the process. Nothing calls them (protoactor's peers
// speak over the stream alone), so the guard refuses every unary call
// with codes.Unimplemented before its handler runs, and logs it.
//
// The endpoint reader sends an envelope whose target address is not its
// own remote's on to that address: a peer that names this process by
// another spelling of its address (localhost for 127.0.0.1, any address
// of a remote listening on every interface, whose own is [::]:PORT) made
// it send the envelope to itself, over and over, and any peer could make
// it relay to any other. A guard that knows its remote's address (self)
// rewrites every target to it instead: an envelope that arrives over this
// process's server was meant for this process, whatever name its sender
// reached it by (protoactor never relays), so it is delivered here, to
// the actor of its target's id.
//
// The guard also tells its owner of each incoming stream that ends
// (ended), once the endpoint reader has delivered everything that came
// over it, and can mark every message with the stream it came over (tag:
// the header connHeader), so that a node can cancel the calls that came
// over a caller's connection when it ends.
type guard struct {
	log     *slog.Logger
	dropped atomic.Int64
	refused atomic.Int64 // unary calls refused
	endNext atomic.Bool  // tests: end the incoming stream that receives the next frame (see carriesFrame)
	tag     bool         // set connHeader on every message received
	streams atomic.Uint64
	self    atomic.Pointer[string] // its remote's address, once known (see setSelf)
	// handshake bounds a new connection's handshake; 0: HandshakeTimeout
	// (tests shorten it).
	handshake time.Duration

	mu    sync.Mutex
	ended func(peer, conn string) // see onEnded
	// wait, when set (a tagging guard's), is called before each read of
	// an incoming stream, with the stream's name: the read waits until
	// it returns (the node's backpressure on a caller, see loads), and
	// fails with its error.
	wait func(ctx context.Context, conn string) error
	// serving counts the incoming streams being served: their endpoint
	// readers deliver what they read. Once stopped (see stop), the guard
	// serves no new stream and delivers nothing more that they read, and
	// streamsEnded is closed once serving is 0.
	serving      int
	streamsEnded chan struct{} // made by stop
	stopped      atomic.Bool   // set under mu
	// Tests: hold is called with each message an incoming stream reads,
	// before the guard looks at it; onStop when stop begins.
	hold   func(*paremote.RemoteMessage)
	onStop func()
}

// connHeader is the message header in which a tagging guard names the
// incoming stream a message came over.
const connHeader = "polyweave-conn"

// onEnded makes g call f each time an incoming stream ends, after every
// message that came over it has been delivered, with the address of the
// peer that opened it ("" when it never said) and the stream's name (as
// in connHeader).
func (g *guard) onEnded(f func(peer, conn string)) {
	g.mu.Lock()
	g.ended = f
	g.mu.Unlock()
}

// serverOptions install the guard on a remote server: its stream
// interceptor and its unary one. They chain with the server's other
// interceptors.
func (g *guard) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainStreamInterceptor(g.interceptStream), grpc.ChainUnaryInterceptor(g.refuseUnary),
		grpc.ConnectionTimeout(g.handshakeTimeout())}
}

// handshakeTimeout is how long a new connection may take to get through
// its handshake (see HandshakeTimeout).
func (g *guard) handshakeTimeout() time.Duration {
	if g.handshake > 0 {
		return g.handshake
	}
	return HandshakeTimeout
}

// HandshakeTimeout bounds how long a peer's new connection may take to
// get through its handshake (TLS, when set, and HTTP/2's preface) before
// the server closes it: a peer that opens connections and sends nothing
// holds a descriptor and a goroutine for each, and without TLS or a
// certificate it needs neither to do so. gRPC's own default is 120 s;
// handshakes between live peers take milliseconds, and this leaves room
// for a machine far busier than that.
const HandshakeTimeout = 20 * time.Second

// interceptStream guards the messages of an incoming stream (see guard).
func (g *guard) interceptStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	s := &guardedStream{ServerStream: ss, g: g, conn: strconv.FormatUint(g.streams.Add(1), 36)}
	g.mu.Lock()
	if g.stopped.Load() {
		g.mu.Unlock()
		return errStopping
	}
	g.serving++
	s.hold = g.hold
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		if g.serving--; g.serving == 0 && g.streamsEnded != nil {
			close(g.streamsEnded)
		}
		g.mu.Unlock()
	}()
	// The endpoint reader delivers each message before it reads the
	// next, and returns once the stream has ended.
	err := handler(srv, s)
	g.mu.Lock()
	ended := g.ended
	g.mu.Unlock()
	if ended != nil {
		ended(s.peer, s.conn)
	}
	return err
}

// errStopping ends an incoming stream whose remote is stopping.
var errStopping = status.Error(codes.Unavailable, "remote: stopping")

// stop makes g serve no new incoming stream and deliver nothing more that
// the streams it serves read, and returns a channel closed once those
// streams have ended (their endpoint readers have returned): stopping the
// remote's gRPC server ends their reads. Until then an endpoint reader
// may be delivering a batch it read before, and what that delivery sends
// to a remote actor (an answer to a request, a dead letter's Terminated
// to a watcher) needs protoactor's endpoints: the pinned endpoint manager
// panics when their supervisor has stopped. So the endpoints stop once
// the channel is closed (see stopRemote). When g serves no stream (a nil
// guard serves none), the channel is closed already.
func (g *guard) stop() <-chan struct{} {
	if g == nil {
		ended := make(chan struct{})
		close(ended)
		return ended
	}
	g.mu.Lock()
	if g.streamsEnded == nil {
		g.streamsEnded = make(chan struct{})
		g.stopped.Store(true)
		if g.serving == 0 {
			close(g.streamsEnded)
		}
	}
	ended, onStop := g.streamsEnded, g.onStop
	g.mu.Unlock()
	if onStop != nil {
		onStop()
	}
	return ended
}

// refuseUnary answers every unary call with codes.Unimplemented without
// running its handler (see guard). It logs the first and then each one
// that doubles their count: a call takes a peer a few bytes (its headers
// compressed), and a record for each would grow the log many times
// faster than the peer's traffic.
func (g *guard) refuseUnary(_ context.Context, _ any, info *grpc.UnaryServerInfo, _ grpc.UnaryHandler) (any, error) {
	if n := g.refused.Add(1); n&(n-1) == 0 {
		g.log.Warn("remote unary call refused", "method", info.FullMethod, "refused_total", n)
	}
	return nil, status.Errorf(codes.Unimplemented, "remote: %s is not served", info.FullMethod)
}

type guardedStream struct {
	grpc.ServerStream
	g    *guard
	conn string // the stream's name
	peer string // the peer's address, from its connect request; the reader's alone
	hold func(*paremote.RemoteMessage)
}

func (s *guardedStream) RecvMsg(m any) error {
	if s.g.wait != nil {
		if err := s.g.wait(s.Context(), s.conn); err != nil {
			return err
		}
	}
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	rm, _ := m.(*paremote.RemoteMessage)
	if s.hold != nil {
		s.hold(rm)
	}
	if s.g.stopped.Load() {
		return errStopping
	}
	if s.g.endNext.Load() && carriesFrame(rm) && s.g.endNext.CompareAndSwap(true, false) {
		return status.Error(codes.Unavailable, "remote: stream ended by a test")
	}
	if rm != nil {
		if b := rm.GetMessageBatch(); b != nil {
			s.g.filter(b)
			s.g.retarget(b)
			if s.g.tag {
				s.tag(b)
			}
		}
		if c := rm.GetConnectRequest().GetServerConnection(); c != nil {
			s.peer = c.GetAddress()
		}
	}
	return nil
}

// frameType is the type name of a polyweave frame on protoactor's wire.
var frameType = string((&messages.Frame{}).ProtoReflect().Descriptor().FullName())

// carriesFrame reports whether m is a message batch with a polyweave frame
// in it (a request or an answer), rather than only protoactor's own
// messages (a watch, a Touch's answer), which a peer sends when it will.
func carriesFrame(m *paremote.RemoteMessage) bool {
	return slices.Contains(m.GetMessageBatch().GetTypeNames(), frameType)
}

// setSelf tells g the address of its remote: from then on, it delivers
// every envelope there (see guard).
func (g *guard) setSelf(addr string) { g.self.Store(&addr) }

// retarget makes every target of b its remote's address (see guard).
func (g *guard) retarget(b *paremote.MessageBatch) {
	self := g.self.Load()
	if self == nil {
		return
	}
	for _, pid := range b.Targets {
		if pid != nil && pid.Address != *self {
			pid.Address = *self
		}
	}
}

// tag names the stream in the header of every envelope of b.
func (s *guardedStream) tag(b *paremote.MessageBatch) {
	for _, e := range b.Envelopes {
		if e.MessageHeader == nil {
			e.MessageHeader = &paremote.MessageHeader{}
		}
		if e.MessageHeader.HeaderData == nil {
			e.MessageHeader.HeaderData = map[string]string{}
		}
		e.MessageHeader.HeaderData[connHeader] = s.conn
	}
}

// Serializer ids of the pinned protoactor: 0 protobuf, 1 JSON.
const (
	serializerProto = 0
	serializerJSON  = 1
)

// filter removes from b the envelopes the endpoint reader cannot handle.
// It logs them once for the batch, naming the first (its type name, which
// the peer chose, clipped), when the guard's count of dropped envelopes
// reaches its first or next power of two: neither a batch of many small
// envelopes, nor one naming a huge type, nor a stream of batches of a few
// bytes each makes the log many times larger than what the peer sent.
func (g *guard) filter(b *paremote.MessageBatch) {
	kept := b.Envelopes[:0]
	dropped, why, typeName, serializer := 0, "", "", int32(0)
	for _, e := range b.Envelopes {
		if reason := g.check(b, e); reason != "" {
			if dropped++; dropped == 1 {
				why, serializer = reason, e.SerializerId
				if e.TypeId >= 0 && int(e.TypeId) < len(b.TypeNames) {
					typeName = clipName(b.TypeNames[e.TypeId])
				}
			}
			continue
		}
		kept = append(kept, e)
	}
	clear(b.Envelopes[len(kept):])
	b.Envelopes = kept
	if dropped == 0 {
		return
	}
	// Each batch's range of the count is its own: whichever contains the
	// next power of two logs it, once.
	total := g.dropped.Add(int64(dropped))
	if bits.Len64(uint64(total)) != bits.Len64(uint64(total-int64(dropped))) {
		g.log.Warn("remote messages dropped", "count", dropped, "first_reason", why, "first_type", typeName, "first_serializer", serializer,
			"kept", len(kept), "dropped_total", total)
	}
}

func (g *guard) check(b *paremote.MessageBatch, e *paremote.MessageEnvelope) string {
	switch {
	case e.TypeId < 0 || int(e.TypeId) >= len(b.TypeNames):
		return "type index out of range"
	case e.Target < 0 || int(e.Target) >= len(b.Targets) || b.Targets[e.Target] == nil:
		return "target index out of range"
	case e.Sender < 0 || int(e.Sender) > len(b.Senders) || e.Sender > 0 && b.Senders[e.Sender-1] == nil:
		return "sender index out of range"
	case e.SerializerId != serializerProto && e.SerializerId != serializerJSON:
		return "unknown serializer"
	}
	name := protoreflect.FullName(b.TypeNames[e.TypeId])
	if !name.IsValid() {
		return "invalid type name"
	}
	if _, err := protoregistry.GlobalTypes.FindMessageByName(name); err != nil {
		return "type not registered in this binary"
	}
	return ""
}

// Dropped counts the envelopes the guard removed.
func (g *guard) Dropped() int64 { return g.dropped.Load() }

// Guard is the message guard of this package for a protoactor remote
// started elsewhere (a cluster member's, say): install
// [Guard.ServerOptions] with remote.WithServerOptions when configuring
// it, and incoming envelopes that would crash the process (an
// unregistered type, a bad index, an unknown serializer) are dropped,
// logged and counted instead, and the unary calls of protoactor's
// service (whose handlers panic) are refused with codes.Unimplemented
// and logged. A Guard guards one remote: stop it with [StopRemote], given
// the Guard, after which the Guard serves no stream.
type Guard struct{ g guard }

// NewGuard returns a guard that logs the messages it drops to logger (nil
// discards).
func NewGuard(logger *slog.Logger) *Guard {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Guard{g: guard{log: logger}}
}

// ServerOptions install the guard on a remote's gRPC server: a stream
// interceptor and a unary one, chained with the server's others, and
// [HandshakeTimeout] for new connections.
func (g *Guard) ServerOptions() []grpc.ServerOption { return g.g.serverOptions() }

// Dropped counts the envelopes the guard removed.
func (g *Guard) Dropped() int64 { return g.g.Dropped() }

// SetAddress tells the guard the address its remote knows itself by
// (the actor system's Address, once the remote has started): from then
// on every envelope that arrives is delivered to this process's own
// actors, whatever address its target names (another spelling of this
// process's, or another host's), rather than sent on by protoactor to
// itself over and over or to another host. Until it is called, targets
// are left as they are.
func (g *Guard) SetAddress(addr string) { g.g.setSelf(addr) }
