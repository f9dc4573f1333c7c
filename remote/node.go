package remote

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	paremote "github.com/asynkron/protoactor-go/remote"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// NodeOptions configures [Serve]. A nil *NodeOptions means defaults.
type NodeOptions struct {
	// Address is the host:port the node listens on; default
	// DefaultAddress. Port 0 picks a free port; [Node.Address] tells
	// which. It must be a loopback one (a loopback IP, or a name all of
	// whose addresses are loopback ones, such as localhost) unless
	// AllowRemote.
	Address string
	// Tools are the tools the node serves; at least one, names unique.
	Tools []*tools.Tool
	// Logger receives the node's logs and protoactor's; nil discards.
	Logger *slog.Logger
	// ConnectTimeout bounds the opening of each connection to a caller
	// (results go back over the node's own connections): a caller that
	// does not complete it in time is gone, and Close does not wait for
	// it longer than that. Default DefaultConnectTimeout; negative:
	// gRPC's own bound (20 s).
	ConnectTimeout time.Duration
	// KeepaliveTime is how long a connection to a caller may stay quiet
	// before the node pings the caller over it, and KeepaliveTimeout how
	// long it then waits for the answer: a caller that does not answer is
	// gone (its calls are cancelled), even when its connection never
	// closes (a network cut, a frozen process). Defaults
	// DefaultKeepaliveTime and DefaultKeepaliveTimeout, as a client's;
	// gRPC pings at most every 10 s, so a shorter time means 10 s;
	// negative KeepaliveTime: no pings (the calls of a caller that
	// vanishes without closing its connection then run until their own
	// timeouts, or until TCP gives up on the connection, which can take
	// hours).
	KeepaliveTime    time.Duration
	KeepaliveTimeout time.Duration
	// MaxFrameBytes bounds one frame the node takes or sends (a call
	// with its arguments, a result, as encoded on the wire): a call over
	// it is not run, and a result over it is not sent; either call is
	// answered instead with an error of kind KindTooLarge (the client's
	// handler returns it wrapping ErrTooLarge). Default
	// DefaultMaxFrameBytes; at least MinFrameBytes and at most
	// MaxFrameBytesLimit (Serve refuses others).
	MaxFrameBytes int
	// TLS, when set, makes the node speak mutual TLS (see [TLS]): only
	// callers with a certificate that chains to TLS.CAs can reach it (so
	// run its tools), over encrypted connections, and the node's
	// connections to them (its answers) check their certificates too.
	// Its clients need a TLS of their own (ClientOptions.TLS) from the
	// same CAs. Nil: no TLS and no authentication, whoever reaches the
	// node's address runs its tools.
	TLS *TLS
	// Advertise is the host:port the node names itself by (its callers
	// must reach it there), when that is not the address it listens on:
	// a node listening on every interface (0.0.0.0:P or [::]:P, which it
	// would name itself [::]:P), or reached through NAT or a port
	// forward. The node names itself so in the connections it opens to
	// its callers (which carry its answers) and in its signs of life, and
	// [Node.Address] returns it. A client reaches a node without it too:
	// it asks the node how it names itself at each connection it opens
	// (a round trip). Default: the address the node listens on. An IPv6 host is written in brackets ([::1]:7710);
	// the port is the one callers reach, from 1 to 65535 (else Serve
	// fails with ErrAdvertise).
	Advertise string
	// MaxConnsPerPeer bounds the connections one peer (an IP address)
	// may have open to the node at once: one more is refused, the peer
	// told why (ErrTooManyConns, in an HTTP/2 GOAWAY) and the refusal
	// logged. Each caller opens one (a new one when it loses it); all the
	// callers of one machine are one peer. Default
	// DefaultMaxConnsPerPeer; negative: no limit.
	MaxConnsPerPeer int
	// HeldMessageTimeout bounds how long the node holds a message not
	// yet whole (it holds a message's frames back from gRPC until the
	// whole message has come, see the package doc's Sizes): a
	// connection whose message is not whole this long after its first
	// bytes is closed, the peer told why (ErrHeldTooLong, in an HTTP/2
	// GOAWAY) and the closing logged, so that a peer trickling a message
	// holds nothing for ever. Default DefaultHeldMessageTimeout;
	// negative: no limit.
	HeldMessageTimeout time.Duration
	// MaxCallsPerCaller bounds what one caller's connection costs the
	// node: a call beyond this many of its calls in flight is answered
	// at once with an error of kind unavailable (tools.FailureUnavailable)
	// that names the limit, without running; and once this many answers
	// to it wait to go out (a caller that reads its answers slowly), the
	// node stops reading its connection until they have gone, so that
	// its further requests wait on its side. Default
	// DefaultMaxCallsPerCaller; negative: no bound.
	MaxCallsPerCaller int
	// AllowRemote lets the node listen on an address that is not a
	// loopback one. Without TLS, a node has no authentication: whoever
	// reaches its address runs its tools, so set it only on a network
	// where every peer is trusted, or behind a tunnel that authenticates.
	AllowRemote bool
}

// ErrAdvertise is the cause of the error Serve returns when
// NodeOptions.Advertise is not a host:port with a host and a port from 1
// to 65535.
var ErrAdvertise = errors.New("remote: NodeOptions.Advertise must be a host:port with a host and a port from 1 to 65535")

// advertiseAddress checks NodeOptions.Advertise (advertise): "" or a
// host:port with a host and a port from 1 to 65535. It returns it as
// protoactor spells addresses (an IPv6 host in brackets).
func advertiseAddress(advertise string) (string, error) {
	if advertise == "" {
		return "", nil
	}
	host, port, err := hostPort(advertise)
	if err != nil {
		return "", fmt.Errorf("%q (%v): %w", advertise, err, ErrAdvertise)
	}
	return net.JoinHostPort(host, strconv.Itoa(port)), nil
}

// hostPort splits address, a host:port with a host and a port from 1 to
// 65535 (one a node is reached at), or says what it lacks.
func hostPort(address string) (host string, port int, err error) {
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return "", 0, err
	}
	port, err = strconv.Atoi(portText)
	switch {
	case host == "":
		return "", 0, errors.New("no host")
	case err != nil || port < 1 || port > 65535:
		return "", 0, fmt.Errorf("port %q is not from 1 to 65535", portText)
	}
	return host, port, nil
}

// dials returns the bounds, pings and credentials of the node's
// connections to its callers.
func (o *NodeOptions) dials() *dials {
	_, creds := o.TLS.credentials()
	return newDials(o.ConnectTimeout, o.KeepaliveTime, o.KeepaliveTimeout, creds)
}

// Node serves tools over protoactor remote: each tool runs as a supervised
// duplex in the node's own runtime, exactly as it would in the host, and
// the node forwards frames between the wire and the tools. Safe for
// concurrent use; Close stops it.
type Node struct {
	rt      *actors.Runtime
	remote  *paremote.Remote
	guard   *guard
	dials   *dials
	addr    string
	log     *slog.Logger
	service *actor.PID
	// endpoints sends the service actor a peerGone for each connection
	// that ends.
	endpoints *eventstream.Subscription

	conns map[string]*actors.Conn
	descs []*messages.Frame // DESCRIPTION frames, one per tool, stream id unset

	maxFrame int // the frame limit (NodeOptions.MaxFrameBytes)

	// loads bounds what each caller's connection costs (see loads).
	loads *loads

	routes sync.Map // callKey → route of the caller awaiting the result

	// callers are the callers the service actor watches (by PID key), so
	// that a caller's actor stopping cancels its calls (its process
	// killed or its connection lost: the connection's peerGone does);
	// the service actor's alone.
	callers map[string]*actor.PID
	// probers are the callers that asked the service actor for a sign of
	// life (actor.Touch) since their connection last ended, by address,
	// the latest last: the answer may have gone into a connection that
	// had ended, so they are answered again when the node learns it ended
	// (see the client's answersLost). At most maxProbersPerAddress per
	// address: a peer that touches from many PIDs (futures) forgets its
	// own oldest ones, the node does not grow. The service actor's alone.
	probers map[string][]*actor.PID

	cancel  context.CancelFunc
	readers sync.WaitGroup // the readers of the tools' results (see read)
	reading atomic.Int64   // how many of them have not returned

	closeOnce sync.Once
	closeErr  error
}

type callKey struct{ stream, id string }

// route is where a call's result goes: the caller's PID, and the tool
// that runs the call; and the incoming stream the call came over (see
// connHeader).
type route struct {
	to   *actor.PID
	tool string
	conn string
}

// callerConnEnded tells the service actor that the incoming stream conn
// (a caller's connection to the node, which carries its calls) ended.
type callerConnEnded struct{ peer, conn string }

// Serve starts a node serving opts.Tools. It refuses an address that is
// not a loopback one with [ErrNotLoopback] unless opts.AllowRemote, and a
// TLS that cannot work with [ErrTLSConfig].
func Serve(opts *NodeOptions) (*Node, error) {
	var o NodeOptions
	if opts != nil {
		o = *opts
	}
	if o.Address == "" {
		o.Address = DefaultAddress
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if len(o.Tools) == 0 {
		return nil, errors.New("remote: a node needs at least one tool")
	}
	risk, err := o.TLS.listenRisk("NodeOptions.TLS", "run the node's tools")
	if err != nil {
		return nil, err
	}
	addr, err := listenAddress(o.Address, o.AllowRemote, "NodeOptions.AllowRemote", risk)
	if err != nil {
		return nil, err
	}
	maxFrame, err := frameLimit(o.MaxFrameBytes, "NodeOptions.MaxFrameBytes")
	if err != nil {
		return nil, err
	}
	advertise, err := advertiseAddress(o.Advertise)
	if err != nil {
		return nil, err
	}
	o.Address = addr
	seen := map[string]bool{}
	for _, t := range o.Tools {
		if t == nil {
			return nil, errors.New("remote: nil tool")
		}
		if seen[t.Name()] {
			return nil, fmt.Errorf("remote: two tools named %q", t.Name())
		}
		seen[t.Name()] = true
	}
	rt, err := actors.NewRuntime(&actors.RuntimeOptions{Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	n := &Node{rt: rt, log: o.Logger, maxFrame: maxFrame, guard: &guard{log: o.Logger, tag: true}, dials: o.dials(),
		conns: map[string]*actors.Conn{}, callers: map[string]*actor.PID{}, probers: map[string][]*actor.PID{}, loads: newLoads(o.MaxCallsPerCaller)}
	n.guard.wait = n.loads.wait
	n.dials.onSent(n.loads.sent)
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	for _, t := range o.Tools {
		conn, err := rt.Start(t.Spec())
		if err != nil {
			n.Close(context.Background())
			return nil, fmt.Errorf("remote: start tool %q: %w", t.Name(), err)
		}
		n.conns[t.Name()] = conn
		desc, err := encodeDescription(t)
		if err != nil {
			n.Close(context.Background())
			return nil, fmt.Errorf("remote: describe tool %q: %w", t.Name(), err)
		}
		d := &messages.Frame{Type: messages.FrameType_DESCRIPTION, Name: t.Name(), Payload: desc}
		// Checked as it goes out: with the stream id of a DESCRIBE.
		if size := oversized(&messages.Frame{Type: d.Type, StreamId: describeStreamRoom, Name: d.Name, Payload: d.Payload}, maxFrame); size > 0 {
			n.Close(context.Background())
			return nil, fmt.Errorf("remote: description of tool %q: %d bytes, limit %d: %w", t.Name(), size, maxFrame, ErrTooLarge)
		}
		n.descs = append(n.descs, d)
		n.read(func() { n.forward(ctx, conn) })
	}
	// Remote first: a PID carries the system's address as it is at spawn,
	// and the Terminated the service sends its watchers when it stops
	// names it by its PID. (A request that arrives before the service
	// exists is answered with a DeadLetterResponse.)
	server, _ := o.TLS.credentials()
	if n.remote, n.addr, err = startRemote(rt.System(), o.Address, advertise, n.guard, newConnLimits(o.Logger, o.MaxConnsPerPeer, o.HeldMessageTimeout), n.dials, maxFrame, server); err != nil {
		n.Close(context.Background())
		return nil, err
	}
	props := actor.PropsFromFunc(n.receive)
	if n.service, err = rt.System().Root.SpawnNamed(props, ServiceName); err != nil {
		n.Close(context.Background())
		return nil, fmt.Errorf("remote: spawn %s: %w", ServiceName, err)
	}
	n.endpoints = watchEndpoints(rt.System(), n.service)
	n.guard.onEnded(func(peer, conn string) { rt.System().Root.Send(n.service, &callerConnEnded{peer: peer, conn: conn}) })
	n.log.Info("tool node serving", "address", n.addr, "tools", len(o.Tools))
	return n, nil
}

// System returns the node's protoactor actor system (with remote
// started), for code that drops down to protoactor (see [Client.System]).
func (n *Node) System() *actor.ActorSystem { return n.rt.System() }

// Address returns the host:port the node is reached at: the one it
// listens on, or NodeOptions.Advertise when set.
func (n *Node) Address() string { return n.addr }

// Dropped counts the incoming messages the node refused because it could
// not decode them safely (see the package documentation).
func (n *Node) Dropped() int64 { return n.guard.Dropped() }

// receive is the service actor: frames from callers go to the tools, and
// a caller's going (its actor stopped, or its connection ended) cancels
// its calls.
// maxProbersPerAddress is the most probers the node remembers for one
// address. A client asks from one actor (its proxy).
const maxProbersPerAddress = 4

// remember returns probers (oldest first) with p as the latest, dropping
// the oldest beyond maxProbersPerAddress.
func remember(probers []*actor.PID, p *actor.PID) []*actor.PID {
	probers = slices.DeleteFunc(probers, p.Equal)
	if len(probers) == maxProbersPerAddress {
		probers = slices.Delete(probers, 0, 1)
	}
	return append(probers, p)
}

// countProbers asks the service actor how many probers it remembers
// (tests).
type countProbers struct{}

func (n *Node) receive(ctx actor.Context) {
	var f *messages.Frame
	switch m := ctx.Message().(type) {
	case *messages.Frame:
		f = m
	case *actor.Terminated:
		// The caller's actor stopped (or was not found). A connection's
		// end (AddressTerminated) is told by its peerGone instead, in
		// order with the calls that came before it: the Terminated comes
		// from the connection's endpoint watcher, on a goroutine of its
		// own, and may arrive after the caller has called again over a
		// newer connection, whose calls it would cancel.
		if m.GetWhy() == actor.TerminatedReason_AddressTerminated {
			return
		}
		cancelled := n.callersGone(m.GetWho().Equal, false)
		n.log.Info("caller gone", "caller", m.GetWho().String(), "cancelled_calls", cancelled)
		return
	case *peerGone:
		// The connection to callers ended (or failed to open): it also
		// stands for the watches that reached its endpoint too late to
		// be answered (see watchEndpoints). The callers may still be
		// there (only this connection lost): they are told. What waited
		// to go out into it is lost with it.
		n.loads.lost(m.address)
		if cancelled := n.callersGone(func(caller *actor.PID) bool { return caller.GetAddress() == m.address }, true); cancelled > 0 {
			n.log.Info("connection to callers gone", "address", m.address, "cancelled_calls", cancelled)
		}
		for _, prober := range n.probers[m.address] {
			ctx.Send(prober, &actor.Touched{Who: ctx.Self()})
		}
		delete(n.probers, m.address)
		return
	case *actor.Touch:
		// A caller asks for a sign of life (protoactor answers it).
		if s := ctx.Sender(); s != nil {
			n.probers[s.GetAddress()] = remember(n.probers[s.GetAddress()], s)
		}
		return
	case countProbers:
		count := 0
		for _, ps := range n.probers {
			count += len(ps)
		}
		ctx.Respond(count)
		return
	case *callerConnEnded:
		// A caller's connection to the node ended: the caller has
		// answered the calls that came over it (its connection to the
		// node lost, the node is gone to it), so they are cancelled, and
		// not answered. The calls that came over a newer connection go
		// on: each call is cancelled by the stream it came over, and the
		// endpoint reader delivered every call of this one before.
		if cancelled := n.cancelRoutes(func(r route) bool { return r.conn == m.conn }, false); cancelled > 0 {
			n.log.Info("connection from caller gone", "address", m.peer, "cancelled_calls", cancelled)
		}
		n.loads.forget(m.conn)
		return
	default:
		return
	}
	from := connOf(ctx) // the connection the request came over
	if t := f.GetType(); (t == messages.FrameType_DESCRIBE || t == messages.FrameType_TOOL_CALL) && longIDs(f) {
		n.log.Warn("request with ids over the bound not served", "type", t.String(), "tool", clipName(f.GetName()),
			"stream_id_bytes", len(f.GetStreamId()), "tool_call_id_bytes", len(f.GetToolCallId()), "bound", maxIDBytes)
		if ctx.Sender() != nil {
			n.answer(ctx, ctx.Sender(), from, idsTooLong(f))
		}
		return
	}
	switch f.GetType() {
	case messages.FrameType_DESCRIBE:
		if ctx.Sender() == nil {
			return
		}
		for _, d := range n.descs {
			d := messages.CloneFrame(d)
			d.StreamId = f.GetStreamId()
			// Only a stream id longer than Serve made room for (not a
			// client's) takes a description over the limit.
			if size := oversized(d, n.maxFrame); size > 0 {
				n.log.Warn("tool description over the frame limit with the caller's stream id: not sent",
					"tool", d.GetName(), "bytes", size, "limit", n.maxFrame, "stream_id_bytes", len(d.GetStreamId()))
				continue
			}
			n.answer(ctx, ctx.Sender(), from, d)
		}
		n.answer(ctx, ctx.Sender(), from, messages.End(f.GetStreamId()))
	case messages.FrameType_TOOL_CALL:
		if ctx.Sender() == nil {
			n.log.Warn("tool call without a sender dropped", "tool", clipName(f.GetName()), "tool_call_id", f.GetToolCallId())
			return
		}
		conn, ok := n.conns[f.GetName()]
		if !ok {
			n.answer(ctx, ctx.Sender(), from, unknownTool(f))
			return
		}
		if size := oversized(f, n.maxFrame); size > 0 {
			n.answer(ctx, ctx.Sender(), from, tooLarge(callKey{f.GetStreamId(), f.GetToolCallId()}, f.GetName(), fmt.Sprintf(
				"Tool %s was not run: its arguments are too large for this node: a call of %d bytes, limit %d", f.GetName(), size, n.maxFrame)))
			return
		}
		if !n.loads.call(from) {
			n.answer(ctx, ctx.Sender(), from, tooBusy(f, n.loads.max))
			return
		}
		n.watchCaller(ctx, ctx.Sender())
		n.routes.Store(callKey{f.GetStreamId(), f.GetToolCallId()}, route{ctx.Sender(), f.GetName(), from})
		if err := conn.Send(f); err != nil {
			n.routes.Delete(callKey{f.GetStreamId(), f.GetToolCallId()})
			n.loads.answered(from)
			n.answer(ctx, ctx.Sender(), from, messages.ToolError(f.GetStreamId(), f.GetToolCallId(), f.GetName(),
				fmt.Sprintf("Tool %s is unavailable on this node: %v", f.GetName(), err)))
		}
	case messages.FrameType_CANCEL, messages.FrameType_ABORT:
		for _, conn := range n.conns {
			_ = conn.Send(f) // a tool without the stream ignores it
		}
	}
}

// answer sends f to the caller to with sender (the service actor's
// context, or the root), in answer to a request that came over the
// connection conn: counted as waiting to go out until gRPC has it (see
// loads), the message marked with conn so that the count ends then.
func (n *Node) answer(sender actor.SenderContext, to *actor.PID, conn string, f *messages.Frame) {
	if conn == "" {
		sender.Send(to, f)
		return
	}
	n.loads.queue(conn, to.GetAddress())
	e := &actor.MessageEnvelope{Message: f}
	e.SetHeader(connHeader, conn)
	sender.Send(to, e)
}

// connOf is the connection (see connHeader) that the message ctx handles
// came over, "" when it came otherwise.
func connOf(ctx actor.Context) string {
	if h := ctx.MessageHeader(); h != nil {
		return h.Get(connHeader)
	}
	return ""
}

// watchCaller watches caller unless the service actor already does.
func (n *Node) watchCaller(ctx actor.Context, caller *actor.PID) {
	if k := caller.String(); n.callers[k] == nil {
		n.callers[k] = caller
		ctx.Watch(caller)
	}
}

// callersGone cancels every call of the callers that gone matches (which
// are gone, or whose connection is), and returns how many it cancelled: a
// tool without a timeout would run on forever. The routes go first, so
// the cancelled results are dropped. When tell, each call is answered
// instead with an error of kind KindConnectionLost: sent to a caller
// whose connection ended, it opens a new one, and a caller still there
// (only the connection lost) learns at once that its call will not be
// answered; to a caller that is gone, it fails to open.
func (n *Node) callersGone(gone func(caller *actor.PID) bool, tell bool) int {
	for k, caller := range n.callers {
		if gone(caller) {
			delete(n.callers, k)
		}
	}
	return n.cancelRoutes(func(r route) bool { return gone(r.to) }, tell)
}

// cancelRoutes cancels every call whose route cancel matches, as
// callersGone does, and returns how many it cancelled.
func (n *Node) cancelRoutes(cancel func(route) bool, tell bool) int {
	cancelled := 0
	n.routes.Range(func(k, v any) bool {
		r := v.(route)
		if !cancel(r) {
			return true
		}
		if _, ok := n.routes.LoadAndDelete(k); ok {
			key := k.(callKey)
			n.loads.answered(r.conn)
			_ = n.conns[r.tool].Send(messages.Cancel(key.stream, key.id))
			if tell {
				n.answer(n.rt.System().Root, r.to, r.conn, connectionLost(key, r.tool))
			}
			cancelled++
		}
		return true
	})
	return cancelled
}

// connectionLost is the answer to the call key of tool, cancelled because
// the node's connection to its caller ended.
func connectionLost(key callKey, tool string) *messages.Frame {
	f := messages.ToolError(key.stream, key.id, tool, fmt.Sprintf(
		"Tool %s was cancelled: its node lost its connection to the caller (the call may have run in part)", tool))
	f.Meta.FailureKind = string(KindConnectionLost)
	return f
}

// describeStreamRoom stands for the stream id of a DESCRIBE when Serve
// checks the size of a description: a client's ids are far shorter.
var describeStreamRoom = strings.Repeat("s", 256)

// maxNameInAnswer bounds the bytes of a caller's tool name that an answer
// repeats: the name of a tool the node does not have may be any size.
const maxNameInAnswer = 256

// clipName returns name, cut to at most maxNameInAnswer bytes (at a
// character, then "…") when it is longer.
func clipName(name string) string { return clip(name, maxNameInAnswer) }

// clip returns s, cut to at most n bytes (at a character, then "…") when
// it is longer.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// maxIDBytes bounds the stream id and the tool call id of a request
// (DESCRIBE, TOOL_CALL) the node serves; a client's are under 64 bytes.
// Every answer repeats them: a request with longer ones could make the
// node answer over its frame limit (and a batch of such answers over the
// wire's, which ends the connection), and its route would hold them for
// as long as the call runs.
const maxIDBytes = 1 << 10

// longIDs reports whether request has an id over maxIDBytes.
func longIDs(request *messages.Frame) bool {
	return len(request.GetStreamId()) > maxIDBytes || len(request.GetToolCallId()) > maxIDBytes
}

// idsTooLong is the answer to a request with an id over maxIDBytes, which
// the node does not serve: an error of kind KindTooLarge whose ids (and
// tool name) are clipped to maxNameInAnswer bytes, so that it stays
// small. Its caller, which is not a client of this package, cannot match
// it to the request by its ids; it is sent for the caller's logs.
func idsTooLong(request *messages.Frame) *messages.Frame {
	name := clipName(request.GetName())
	key := callKey{clip(request.GetStreamId(), maxNameInAnswer), clip(request.GetToolCallId(), maxNameInAnswer)}
	return tooLarge(key, name, fmt.Sprintf("The %s was not served: its ids are too long for this node (%d and %d bytes, at most %d each)",
		request.GetType(), len(request.GetStreamId()), len(request.GetToolCallId()), maxIDBytes))
}

// unknownTool is the answer to call, of a tool the node does not have.
func unknownTool(call *messages.Frame) *messages.Frame {
	name := clipName(call.GetName())
	f := messages.ToolError(call.GetStreamId(), call.GetToolCallId(), name, "Unknown tool: "+name)
	f.Meta.FailureKind = string(tools.FailureUnknownTool)
	return f
}

// forward sends each result a tool emits to the caller that asked for it;
// a result over the node's frame limit is replaced by an error saying so.
func (n *Node) forward(ctx context.Context, conn *actors.Conn) {
	for {
		f, err := conn.Recv(ctx)
		if err != nil {
			return
		}
		if f.GetType() != messages.FrameType_TOOL_RESULT {
			continue
		}
		key := callKey{f.GetStreamId(), f.GetToolCallId()}
		if v, ok := n.routes.LoadAndDelete(key); ok {
			r := v.(route)
			n.loads.answered(r.conn)
			if size := oversized(f, n.maxFrame); size > 0 {
				n.log.Warn("tool result too large to send", "tool", f.GetName(), "tool_call_id", key.id, "bytes", size, "limit", n.maxFrame)
				f = tooLarge(key, f.GetName(), fmt.Sprintf(
					"Tool %s ran, but its result is too large to send: %d bytes, limit %d", f.GetName(), size, n.maxFrame))
			}
			n.answer(n.rt.System().Root, r.to, r.conn, f)
		}
	}
}

// Close stops serving: the remote server, the tools (calls in flight are
// answered "stopped", and the answers are sent while the server still
// runs), and the runtime. Each call in flight gets one answer, but a
// client may learn that the node went before it takes those answers: it
// then answers its calls with ErrNodeUnreachable instead. It waits until they are gone or ctx ends: then
// it returns an error wrapping ctx's that names what is still stopping
// (callers still connecting are given up at NodeOptions.ConnectTimeout),
// and the rest of the stop goes on once it can (a tool that has not
// stopped holds the server and the runtime until it has).
// Later calls return the first call's result.
func (n *Node) Close(ctx context.Context) error {
	n.closeOnce.Do(func() {
		if n.endpoints != nil {
			n.rt.System().EventStream.Unsubscribe(n.endpoints)
		}
		var errs []error
		for _, conn := range n.conns {
			errs = append(errs, conn.Close(ctx))
		}
		// Each reader ends once its tool has stopped and its results
		// have gone out: before the service's Terminated, which ends
		// every call its callers still wait on. A tool that has not
		// stopped by ctx's end holds its reader: the rest of the stop
		// then goes on once the readers have ended.
		if n.reading.Load() > 0 {
			read := make(chan struct{})
			go func() {
				n.readers.Wait()
				close(read)
			}()
			select {
			case <-read:
			case <-ctx.Done():
				go func() {
					<-read
					_ = n.stop(context.Background())
				}()
				errs = append(errs, fmt.Errorf("read the tools' results: a tool had not stopped (the node stops once it has): %w",
					n.dials.stopError(ctx.Err())))
				n.closeErr = fmt.Errorf("remote: close node: %w", errors.Join(errs...))
				return
			}
		}
		if err := n.stop(ctx); err != nil {
			errs = append(errs, err)
		}
		if err := errors.Join(errs...); err != nil {
			n.closeErr = fmt.Errorf("remote: close node: %w", err)
		}
	})
	return n.closeErr
}

// read runs f, a reader of a tool's results, in a goroutine that Close
// waits for.
func (n *Node) read(f func()) {
	n.reading.Add(1)
	n.readers.Go(func() {
		defer n.reading.Add(-1)
		f()
	})
}

// stop stops what Close stops once the readers of the tools' results have
// ended: the service, the remote and the runtime.
func (n *Node) stop(ctx context.Context) error {
	n.cancel()
	var errs []error
	if n.service != nil {
		if err := await(ctx, n.rt.System().Root.StopFuture(n.service)); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", ServiceName, err))
		}
	}
	if n.remote != nil {
		errs = append(errs, stopRemote(ctx, n.rt.System(), n.remote, n.guard, n.dials))
	}
	errs = append(errs, n.rt.Close(ctx))
	return errors.Join(errs...)
}
