package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	paremote "github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc/status"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/internal/loopback"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// ErrNodeUnreachable is the cause of the error a remote tool's handler
// returns when the node serving it is gone (killed, disconnected,
// shut down) or cannot be reached: the call is answered with it at once
// instead of waiting for its timeout.
var ErrNodeUnreachable = errors.New("tool node unreachable")

// ErrClosed is returned by a [Client] used after Close, and answers the
// calls still waiting when it closes.
var ErrClosed = errors.New("remote: client closed")

// ErrConnectionLost is the cause of the error a remote tool's handler
// returns when the node's connection to the client (the one the node's
// answers take) ended while the call ran, or with its result: the node
// cancelled the call and, over a new connection, answered it with an
// error result of kind [KindConnectionLost]; or the client, which learns
// that connection's end too, answered it so itself (it cancels the call
// on the node, which may have run it) once the node, still there, has
// answered over a new connection what it sent before. A DESCRIBE whose
// answer was lost so fails with an error wrapping it.
var ErrConnectionLost = errors.New("the tool node lost its connection to the client and cancelled the call")

// KindConnectionLost is the failure kind of the answer a node sends a
// caller for each of its calls that it cancelled because its connection
// to the caller ended (the caller still there: its connection to the node
// still open, say), and of the one the client makes for a call whose
// result was lost with that connection. The client's handler answers
// such a call with the message, of this kind (a *tools.ResultError
// wrapping [ErrConnectionLost]); it does not count against the tool.
const KindConnectionLost tools.FailureKind = "connection_lost"

// DefaultCallTimeout bounds a call of a remote tool that has no timeout of
// its own (the node's tool enforces its own limits, but a node that stops
// answering must not hang the call).
const DefaultCallTimeout = 10 * time.Minute

// DefaultRedialBackoff is how long a client leaves a node alone after a
// connection to it failed to open, unless ClientOptions.RedialBackoff
// says otherwise; each further failure doubles it, up to
// DefaultMaxRedialBackoff.
const DefaultRedialBackoff = time.Second

// DefaultMaxRedialBackoff bounds the doubling of the redial backoff unless
// ClientOptions.MaxRedialBackoff says otherwise.
const DefaultMaxRedialBackoff = 30 * time.Second

// ClientOptions configures [NewClient]. A nil *ClientOptions means
// defaults.
type ClientOptions struct {
	// Address is the host:port the client listens on for the nodes'
	// answers; default DefaultAddress. Nodes must be able to reach it.
	// It must be a loopback one (a loopback IP, or a name all of whose
	// addresses are loopback ones, such as localhost) unless AllowRemote.
	Address string
	// CallTimeout bounds calls of remote tools whose description has no
	// timeout; default DefaultCallTimeout. Negative: no bound.
	CallTimeout time.Duration
	// Logger receives the client's logs and protoactor's, protoactor's
	// INFO records (its connections opening and closing, say) lowered to
	// DEBUG as a runtime's are (see actors.RuntimeOptions); nil discards.
	Logger *slog.Logger
	// ConnectTimeout bounds the opening of each connection to a node:
	// a node that does not complete it in time (one that accepts TCP but
	// never speaks gRPC, say) is unreachable, and Close does not wait
	// for it longer than that. Default DefaultConnectTimeout; negative:
	// gRPC's own bound (20 s).
	ConnectTimeout time.Duration
	// KeepaliveTime is how long a connection to a node may stay quiet
	// before the client pings the node over it, and KeepaliveTimeout how
	// long it then waits for the answer: a node that does not answer is
	// gone (its calls in flight are answered with ErrNodeUnreachable),
	// even when its connection never closes (a network cut, a frozen
	// process). Defaults DefaultKeepaliveTime and
	// DefaultKeepaliveTimeout; gRPC pings at most every 10 s, so a
	// shorter time means 10 s; negative KeepaliveTime: no pings (a node
	// that vanishes without closing its connection is then noticed only
	// by the calls' timeouts).
	KeepaliveTime    time.Duration
	KeepaliveTimeout time.Duration
	// RedialBackoff is how long the client leaves a node alone after a
	// connection to it failed to open: until then, calls of the node are
	// answered at once with ErrNodeUnreachable, without dialling it. Each
	// further failure doubles the wait, up to MaxRedialBackoff; a
	// connection that opens ends it. A connection counts as failed
	// whether or not the call that dialled it still waits (its ctx may
	// have ended first). A node whose open connection ends is dialled
	// again at the next call; one whose service stopped while its
	// connection stayed open (a node closing, or not yet serving) is
	// called over that connection, not backed off. Default
	// DefaultRedialBackoff; negative: no
	// wait (every call dials). The client forgets a node gone once its
	// wait has passed by MaxRedialBackoff or more and nothing waits on
	// it (so that the nodes that never come back are not kept for ever):
	// a failure after that is taken for its first, and reported again.
	RedialBackoff time.Duration
	// MaxRedialBackoff bounds the doubling of RedialBackoff; default
	// DefaultMaxRedialBackoff, and never less than RedialBackoff.
	MaxRedialBackoff time.Duration
	// OnNodeGone, when set, is called with a node's address each time the
	// client learns that a node it has called is gone (its calls in flight
	// have then been answered with ErrNodeUnreachable): once for each
	// going, however many ways the client hears of it, and not again for
	// the calls that fail while the node stays gone (it is reported
	// again only once it has come back, a connection to it opened or a
	// request answered, and gone again, or once the client has forgotten
	// it: see RedialBackoff). It runs
	// on the client's actor and must return quickly.
	OnNodeGone func(address string)
	// MaxFrameBytes bounds the frame of one call (the TOOL_CALL with its
	// arguments, as encoded on the wire): a larger call is answered at
	// once with an error of kind KindTooLarge (wrapping ErrTooLarge) and
	// not sent. Default DefaultMaxFrameBytes; at least MinFrameBytes
	// and at most MaxFrameBytesLimit (NewClient refuses others). The node has a limit of its own, for calls and
	// for results (see NodeOptions.MaxFrameBytes).
	MaxFrameBytes int
	// TLS, when set, makes the client speak mutual TLS (see [TLS]): it
	// reaches only nodes whose certificate chains to TLS.CAs, presenting
	// its own, and only they can connect to it to answer its calls. Its
	// nodes need a TLS of their own (NodeOptions.TLS) from the same CAs.
	// A node it cannot reach so (a node without TLS, or whose certificate
	// it does not trust, or that does not trust its own) is unreachable:
	// its calls are answered with ErrNodeUnreachable, the error naming
	// the TLS failure. Nil: no TLS and no authentication.
	TLS *TLS
	// MaxConnsPerPeer bounds the connections one peer (an IP address)
	// may have open to the client at once (nodes open one each, to send
	// their answers): one more is refused, the peer told why
	// (ErrTooManyConns, in an HTTP/2 GOAWAY) and the refusal logged.
	// Default DefaultMaxConnsPerPeer; negative: no limit.
	MaxConnsPerPeer int
	// HeldMessageTimeout bounds how long the client holds a message not
	// yet whole (it holds a message's frames back from gRPC until the
	// whole message has come, see the package doc's Sizes): a
	// connection whose message is not whole this long after its first
	// bytes is closed, the peer told why (ErrHeldTooLong, in an HTTP/2
	// GOAWAY) and the closing logged, so that a peer trickling a message
	// holds nothing for ever. Default DefaultHeldMessageTimeout;
	// negative: no limit.
	HeldMessageTimeout time.Duration
	// AllowRemote lets the client listen on an address that is not a
	// loopback one, as it must when its nodes run on other machines.
	// Without TLS, a client has no authentication: whoever reaches its
	// address can send it answers to its calls, so set it only on a
	// network where every peer is trusted, or behind a tunnel that
	// authenticates.
	AllowRemote bool
}

// Client reaches tool nodes: [Client.Tools] returns a node's tools as
// ordinary *tools.Tool values whose calls run on the node. Safe for
// concurrent use; Close stops it.
type Client struct {
	rt          *actors.Runtime // owns the system (and lowers protoactor's logs)
	system      *actor.ActorSystem
	remote      *paremote.Remote
	guard       *guard
	dials       *dials
	proxy       *actor.PID
	actor       *proxy                    // the proxy's state (tests set its clock)
	endpoints   *eventstream.Subscription // peerGone to the proxy
	addr        string
	prefix      string
	seq         atomic.Uint64
	callTimeout time.Duration
	maxFrame    int
	log         *slog.Logger

	// mu guards closed and waiting: every request registers its waiter
	// here before it is handed to the proxy, so that Close can answer the
	// ones the stopped proxy never saw.
	mu      sync.Mutex
	closed  bool
	waiting map[*waiter]struct{}

	closeOnce sync.Once
	closeErr  error
}

// spawnProxy spawns a client's actor (a test makes it fail).
var spawnProxy = (*actor.RootContext).SpawnNamed

// NewClient starts a client: an actor system with protoactor remote,
// listening for the nodes' answers. It refuses an address that is not a
// loopback one with [ErrNotLoopback] unless opts.AllowRemote, and a TLS
// that cannot work with [ErrTLSConfig].
func NewClient(opts *ClientOptions) (*Client, error) {
	var o ClientOptions
	if opts != nil {
		o = *opts
	}
	if o.Address == "" {
		o.Address = DefaultAddress
	}
	risk, err := o.TLS.listenRisk("ClientOptions.TLS", "answer the client's calls")
	if err != nil {
		return nil, err
	}
	addr, err := listenAddress(o.Address, o.AllowRemote, "ClientOptions.AllowRemote", risk)
	if err != nil {
		return nil, err
	}
	o.Address = addr
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	maxFrame, err := frameLimit(o.MaxFrameBytes, "ClientOptions.MaxFrameBytes")
	if err != nil {
		return nil, err
	}
	switch {
	case o.CallTimeout == 0:
		o.CallTimeout = DefaultCallTimeout
	case o.CallTimeout < 0:
		o.CallTimeout = tools.NoTimeout
	}
	rt, err := actors.NewRuntime(&actors.RuntimeOptions{Logger: o.Logger})
	if err != nil {
		return nil, fmt.Errorf("remote: client: %w", err)
	}
	p := newProxy(o)
	server, dial := o.TLS.credentials()
	c := &Client{rt: rt, system: rt.System(), guard: &guard{log: o.Logger}, dials: newDials(o.ConnectTimeout, o.KeepaliveTime, o.KeepaliveTimeout, dial),
		callTimeout: o.CallTimeout, maxFrame: maxFrame, log: o.Logger, waiting: map[*waiter]struct{}{}, actor: p}
	// Remote first: a PID carries the system's address as it is at spawn.
	if c.remote, c.addr, err = startRemote(c.system, o.Address, "", c.guard, newConnLimits(o.Logger, o.MaxConnsPerPeer, o.HeldMessageTimeout), c.dials, maxFrame, server); err != nil {
		_ = rt.Close(context.Background())
		return nil, err
	}
	if c.proxy, err = spawnProxy(c.system.Root, actor.PropsFromProducer(func() actor.Actor { return p }), "polyweave-client"); err != nil {
		// As Close stops it: the endpoints and the activator too, once
		// the guard has ended the incoming streams.
		_ = stopRemote(context.Background(), c.system, c.remote, c.guard, c.dials)
		_ = rt.Close(context.Background())
		return nil, fmt.Errorf("remote: spawn client proxy: %w", err)
	}
	c.endpoints = watchEndpoints(c.system, c.proxy)
	c.dials.onOpen(func(addr string) {
		c.system.Root.Send(c.proxy, &peerOpened{address: addr})
		c.system.Root.Send(c.proxy, &askSelf{address: addr})
	})
	// Sent before the failure's peerGone (see dials.failed), so the
	// proxy has the reason when it answers the calls.
	c.dials.onFailed(func(addr string, err error) { c.system.Root.Send(c.proxy, &openFailed{address: addr, err: err}) })
	c.dials.onEnded(func(addr string, err error) { c.system.Root.Send(c.proxy, connEnded(addr, err)) })
	c.guard.onEnded(func(peer, _ string) {
		if peer != "" {
			c.system.Root.Send(c.proxy, &answersLost{address: peer})
		}
	})
	// Stream ids are unique across clients: the node keys calls by them.
	c.prefix = c.system.ID + "-"
	return c, nil
}

// System returns the client's protoactor actor system (with remote
// started), for code that drops down to protoactor. A process should run
// one protoactor remote: the pinned version sets gRPC's global logger each
// time one starts, which races with the gRPC goroutines of any other.
func (c *Client) System() *actor.ActorSystem { return c.system }

// Address returns the host:port nodes answer the client at.
func (c *Client) Address() string { return c.addr }

// Dropped counts the incoming messages the client refused because it could
// not decode them safely.
func (c *Client) Dropped() int64 { return c.guard.Dropped() }

func (c *Client) nextStream() string { return c.prefix + strconv.FormatUint(c.seq.Add(1), 36) }

// send hands msg to the proxy unless the client is closed.
func (c *Client) send(msg any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.system.Root.Send(c.proxy, msg)
	return nil
}

// begin registers a waiter for frame and hands the request to the proxy,
// unless the client is closed. The caller must call end when it stops
// waiting.
func (c *Client) begin(node *actor.PID, frame *messages.Frame) (*waiter, error) {
	w := &waiter{node: node, done: make(chan struct{})}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	c.waiting[w] = struct{}{}
	c.system.Root.Send(c.proxy, &start{frame: frame, w: w})
	return w, nil
}

// end forgets w: its caller no longer waits.
func (c *Client) end(w *waiter) {
	c.mu.Lock()
	delete(c.waiting, w)
	c.mu.Unlock()
}

// Tools asks the node at address to describe its tools (DESCRIBE over the
// wire) and returns them as tools whose handlers call the node. Use them
// like local tools, in routers, loops and agents: arguments are validated
// against the node's schemas before they are sent, a call's timeout is the
// node's own (or ClientOptions.CallTimeout when it has none), a cancelled
// call is cancelled on the node, and a call whose node goes away is
// answered with [ErrNodeUnreachable]. A tool whose author declared no
// capabilities is not read-only here either ([tools.Description.ReadOnly]):
// the node says so beside its description (a node that does not, an
// older one, has its tools count as declared).
//
// A loopback name (localhost) is resolved first, to the loopback IP a node
// told to listen there listens on: the client calls the node, and matches
// what the node says of itself, by the address the node knows itself by.
// An address that is not a host:port with a port from 1 to 65535, or
// that is the client's own, is refused at once with [ErrNodeAddress].
func (c *Client) Tools(ctx context.Context, address string) ([]*tools.Tool, error) {
	host, port, err := hostPort(dialAddress(address))
	if err != nil {
		return nil, fmt.Errorf("remote: describe tools of %q: %v: %w", address, err, ErrNodeAddress)
	}
	// The port as the node spells it (not 07710): the client matches
	// what the node says of itself by the address it knows itself by.
	node := actor.NewPID(net.JoinHostPort(host, strconv.Itoa(port)), ServiceName)
	if node.Address == c.addr {
		// The client serves no tools: a request sent there would meet
		// no actor and wait for its ctx.
		return nil, fmt.Errorf("remote: describe tools of %q: it is the client's own address: %w", address, ErrNodeAddress)
	}
	stream := c.nextStream()
	w, err := c.begin(node, messages.Describe(stream))
	if err != nil {
		return nil, err
	}
	defer c.end(w)
	select {
	case <-w.done:
	case <-ctx.Done():
		_ = c.send(&forget{node: node, key: callKey{stream, ""}})
		return nil, fmt.Errorf("remote: describe tools of %s: %w", address, ctx.Err())
	}
	if w.err != nil {
		return nil, fmt.Errorf("remote: describe tools of %s: %w", address, w.err)
	}
	out := make([]*tools.Tool, 0, len(w.descriptions))
	for _, f := range w.descriptions {
		d, caps, err := decodeDescription(f.GetPayload())
		if err != nil {
			return nil, fmt.Errorf("remote: tool description from %s: %w", address, err)
		}
		timeout := c.callTimeout
		if d.TimeoutMs > 0 {
			timeout = time.Duration(d.TimeoutMs) * time.Millisecond
		}
		t, err := tools.New(tools.Definition{
			Name:          d.Name,
			Description:   d.Description,
			Capabilities:  caps,
			Transactional: d.Transactional,
			Irreversible:  !d.Reversible,
			Idempotent:    d.Idempotent,
			Schema:        d.Schema,
			OutputSchema:  d.OutputSchema,
			Timeout:       timeout,
			Handler:       c.handler(node, d.Name),
		})
		if err != nil {
			return nil, fmt.Errorf("remote: tool %q from %s: %w", d.Name, address, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// dialAddress returns the address to call the node at address by: for a
// loopback name (localhost, as written), the loopback IP it resolves to,
// as a node listening there resolves it (see listenAddress); else address.
func dialAddress(address string) string {
	host, _, err := net.SplitHostPort(address)
	if err != nil || net.ParseIP(host) != nil || !loopback.IsName(host) {
		return address
	}
	if addr, err := loopback.ListenAddress(address, ErrNotLoopback); err == nil {
		return addr
	}
	return address
}

// handler sends each call to the node as a TOOL_CALL frame and waits for
// its TOOL_RESULT, for the node to go away, or for ctx (timeout, CANCEL),
// in which case the node is told to cancel the call. A call whose frame is
// over the client's frame limit is answered at once, and not sent.
func (c *Client) handler(node *actor.PID, name string) tools.HandlerFunc {
	return func(ctx context.Context, args json.RawMessage) (any, error) {
		stream := c.nextStream()
		call := messages.ToolCall(stream, stream, name, args)
		if size := oversized(call, c.maxFrame); size > 0 {
			return nil, callError(tooLarge(callKey{stream, stream}, name, fmt.Sprintf(
				"Tool %s was not called: its arguments are too large to send: a call of %d bytes, limit %d", name, size, c.maxFrame)))
		}
		w, err := c.begin(node, call)
		if err != nil {
			return nil, err
		}
		defer c.end(w)
		select {
		case <-w.done:
		case <-ctx.Done():
			_ = c.send(&forget{node: node, key: callKey{stream, stream}, cancel: true})
			return nil, ctx.Err()
		}
		if w.err != nil {
			return nil, w.err
		}
		if err := callError(w.result); err != nil {
			return nil, err
		}
		return json.RawMessage(w.result.GetPayload()), nil
	}
}

// callError returns the error a node's result answers its call with: nil
// for a success; the node's message for an error; for the answer of a
// call the node cancelled when it lost its connection to the client, the
// node's answer, of its kind, wrapping ErrConnectionLost; for one too
// large, of KindTooLarge, wrapping ErrTooLarge; for one not run (kind
// unavailable: the node's limit of calls per caller, say), of that kind.
func callError(result *messages.Frame) error {
	if !result.IsErrorResult() {
		return nil
	}
	var body struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(result.GetPayload(), &body) != nil || body.Error == "" {
		body.Error = string(result.GetPayload())
	}
	switch kind := tools.KindOf(result); kind {
	case KindConnectionLost:
		return &tools.ResultError{Payload: result.GetPayload(), Kind: kind, Err: fmt.Errorf("%s: %w", body.Error, ErrConnectionLost)}
	case KindTooLarge:
		return &tools.ResultError{Payload: result.GetPayload(), Kind: kind, Err: fmt.Errorf("%s: %w", body.Error, ErrTooLarge)}
	case tools.FailureUnavailable:
		// Not run (the node's limit of calls per caller, say): it says
		// nothing of the tool's health.
		return &tools.ResultError{Payload: result.GetPayload(), Kind: kind, Err: errors.New(body.Error)}
	}
	return errors.New(body.Error)
}

// Close stops the client: the calls still waiting are cancelled on their
// nodes (CANCEL) and answered with ErrClosed, and so is every DESCRIBE
// still waiting; then its connections close. It returns once all of that
// is done, or when ctx ends: then with an error wrapping ctx's that names
// the nodes still connecting (each is given up at ClientOptions.ConnectTimeout,
// and the client finishes stopping on its own). Later calls return the
// first call's result.
func (c *Client) Close(ctx context.Context) error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		c.system.EventStream.Unsubscribe(c.endpoints)
		var errs []error
		if err := await(ctx, c.system.Root.StopFuture(c.proxy)); err != nil {
			errs = append(errs, fmt.Errorf("stop the client's actor: %w", err))
		}
		// The proxy answered what it had; a request still in its mailbox
		// when it stopped was dropped with it.
		c.mu.Lock()
		for w := range c.waiting {
			w.finish(func() { w.err = ErrClosed })
		}
		clear(c.waiting)
		c.mu.Unlock()
		if err := stopRemote(ctx, c.system, c.remote, c.guard, c.dials); err != nil {
			errs = append(errs, err)
		}
		if err := c.rt.Close(ctx); err != nil {
			errs = append(errs, err)
		}
		if err := errors.Join(errs...); err != nil {
			c.closeErr = fmt.Errorf("remote: close client: %w", err)
		}
	})
	return c.closeErr
}

// waiter is one DESCRIBE or TOOL_CALL waiting for its answer; done is
// closed once result (or descriptions) or err is set, by finish.
type waiter struct {
	node         *actor.PID
	result       *messages.Frame
	descriptions []*messages.Frame
	err          error
	done         chan struct{}

	once  sync.Once
	descs []*messages.Frame // DESCRIPTION frames so far; the proxy's alone
	tool  string            // the tool called ("" for a DESCRIBE); the proxy's alone
	lost  bool              // its answer may have been lost (see answersLost); the proxy's alone
}

// finish sets the answer (set) and closes done, the first time only: the
// proxy and Close may both answer a waiter.
func (w *waiter) finish(set func()) {
	w.once.Do(func() {
		set()
		close(w.done)
	})
}

// Messages from the client's methods to its proxy actor (never sent over
// the wire).
type (
	start struct {
		frame *messages.Frame
		w     *waiter
	}
	forget struct {
		node   *actor.PID
		key    callKey
		cancel bool
	}
)

// proxy is the client's actor: it sends requests to nodes (as itself, so
// that answers come back to it), watches each node it talks to, keeps
// track of the nodes that are gone, and completes waiters.
type proxy struct {
	log     *slog.Logger
	pending map[callKey]*waiter
	watched map[string]bool // node addresses watched since their last termination (see watch)
	onGone  func(string)

	// open holds the nodes with a connection opened since they were last
	// gone; dialling the nodes a call went to without such a connection
	// (one is opening), until it opens or fails, whether or not the call
	// still waits; down the nodes known gone (and reported), until a
	// connection to them opens, or they are forgotten (see sweep).
	open      map[string]bool
	dialling  map[string]bool
	down      map[string]*redial
	failures  map[string]error  // why the connection to a node failed to open, until its peerGone
	cut       map[string]string // why its open connection ended (see connEnded), until its peerGone
	tls       bool              // the client speaks TLS
	backoff   time.Duration     // after the first failure to open; <= 0: none
	max       time.Duration     // bound of the doubling
	now       func() time.Time
	nextSweep time.Time // sweep's next run, at the earliest

	// unsure holds the nodes asked for a sign of life after a connection
	// from them ended (see answersLost), until it comes or they are
	// gone: a request sent to them meanwhile may have its answer sent
	// into that connection too.
	unsure map[string]bool

	// selves holds, for each node with a connection open, the address
	// it calls itself when that differs from the one dialled (a node
	// listening on 0.0.0.0:P calls itself [::]:P; a DNS name or another
	// interface), learned from its answer to a Touch (see askSelf). The
	// node names itself by it in its signs of life, its Terminated and
	// the connections it opens to the client; the client keys its calls
	// by the address dialled.
	selves map[string]string
}

// redial is the backoff of a node known gone: it is not dialled before at
// (for a node whose open connection ended: the time it ended).
type redial struct {
	failures int // connections that failed to open in a row
	at       time.Time
	why      string // why the last one failed to open, when known
}

// newProxy returns the actor of a client with options o.
func newProxy(o ClientOptions) *proxy {
	p := &proxy{log: o.Logger, pending: map[callKey]*waiter{}, watched: map[string]bool{}, onGone: o.OnNodeGone,
		open: map[string]bool{}, dialling: map[string]bool{}, unsure: map[string]bool{}, selves: map[string]string{}, down: map[string]*redial{}, failures: map[string]error{},
		cut:     map[string]string{},
		backoff: o.RedialBackoff, max: o.MaxRedialBackoff, now: time.Now, tls: o.TLS != nil}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.backoff == 0 {
		p.backoff = DefaultRedialBackoff
	}
	if p.max == 0 {
		p.max = DefaultMaxRedialBackoff
	}
	p.max = max(p.max, p.backoff)
	return p
}

// peerOpened tells the client's actor that a connection to the node at
// address has opened (its first answer came).
type peerOpened struct{ address string }

// openFailed tells the client's actor why a connection to the node at
// address failed to open (a TLS handshake refused, say), before the
// peerGone of the failure.
type openFailed struct {
	address string
	err     error
}

// connCut tells the client's actor why an open connection to the node at
// address ended, before the peerGone of its end.
type connCut struct{ address, why string }

// connEnded is the connCut of an open connection to the node at addr that
// ended with gRPC's error err: the code and debug data of the node's
// GOAWAY when it sent one, and else the error itself (the node closed the
// connection without a word, or the network failed it: a read that
// failed, pings unanswered).
func connEnded(addr string, err error) *connCut {
	if why := goAwayReason(err); why != "" {
		return &connCut{address: addr, why: "the node closed the connection: " + why}
	}
	return &connCut{address: addr, why: "the connection ended: " + status.Convert(err).Message()}
}

// answersLost tells the client's actor that a connection from the node at
// address (one that carries its answers) ended: the answers it carried
// last may be lost with it.
type answersLost struct{ address string }

// askSelf tells the client's actor that a connection to the node at
// address has opened: it asks the node for the address the node calls
// itself (see proxy.selves).
type askSelf struct{ address string }

// askSelfTimeout bounds the wait for a node's answer to askSelf's Touch.
const askSelfTimeout = time.Minute

func (p *proxy) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *start:
		p.sweep()
		key := callKey{m.frame.GetStreamId(), m.frame.GetToolCallId()}
		node := m.w.node
		if r := p.down[node.Address]; r != nil && p.now().Before(r.at) {
			// Backed off: answered at once, without a dial.
			why := ""
			if r.why != "" {
				why = "; " + r.why
			}
			err := fmt.Errorf("%s (gone; not dialled again for %v%s): %w", node.Address, r.at.Sub(p.now()).Round(time.Millisecond), why, ErrNodeUnreachable)
			m.w.finish(func() { m.w.err = err })
			return
		}
		m.w.tool = m.frame.GetName()
		m.w.lost = p.unsure[node.Address]
		p.pending[key] = m.w
		ctx.Request(node, m.frame)
		if p.open[node.Address] {
			p.watch(ctx, node.Address)
		} else {
			p.dialling[node.Address] = true
		}
	case *forget:
		_, sent := p.pending[m.key]
		delete(p.pending, m.key)
		// A call still pending went out, into the connection (open or
		// opening) that its CANCEL follows it through; one already
		// answered (its node gone, or backed off) needs none, and a
		// CANCEL would dial its node.
		if m.cancel && sent {
			ctx.Send(m.node, messages.Cancel(m.key.stream, m.key.id))
		}
	case *messages.Frame:
		p.frame(m)
	case *actor.Terminated:
		// The node's service stopped: nothing pending there will be
		// answered. A connection's end (AddressTerminated) is told by
		// its peerGone instead, in order with its opening: the
		// Terminated comes from the connection's endpoint watcher, on a
		// goroutine of its own, and may arrive after a newer connection
		// to the node has opened, which it would be taken for.
		if m.GetWhy() != actor.TerminatedReason_AddressTerminated {
			for _, addr := range p.dialled(m.GetWho().GetAddress()) {
				p.gone(addr, false)
			}
		}
	case *openFailed:
		p.failures[m.address] = m.err
	case *connCut:
		p.cut[m.address] = m.why
	case *peerGone:
		// The connection to a node ended (or failed to open): the same.
		p.gone(m.address, true)
		delete(p.failures, m.address)
		delete(p.cut, m.address)
	case *peerOpened:
		p.open[m.address] = true
		delete(p.dialling, m.address)
		delete(p.down, m.address)
		p.watch(ctx, m.address)
	case *askSelf:
		addr := m.address
		f := ctx.RequestFuture(actor.NewPID(addr, ServiceName), &actor.Touch{}, askSelfTimeout)
		ctx.ReenterAfter(f, func(res any, _ error) {
			if t, ok := res.(*actor.Touched); ok {
				p.learnSelf(addr, t.GetWho().GetAddress())
			}
		})
	case *answersLost:
		// A connection from the node ended: an answer it carried may be
		// lost (the node forgets a call when it sends the result). The
		// node is asked for a sign of life (its answer, or the one it
		// sends when it learns that connection ended, comes over a new
		// connection, after the answers the node sent before it): the
		// requests waiting now that still wait then are answered then,
		// and so are those sent to the node before it (the node, which
		// may not yet have seen the connection end, may send their
		// answers into it too). A node that is gone is told by its
		// peerGone instead.
		// A DESCRIBE waiting is answered so too, at the sign of life,
		// even when its END comes before it (see frame): part of its
		// answer may have gone into that connection, the rest over a new
		// one.
		// The node names itself in the connections it opens (see
		// proxy.selves).
		for _, addr := range p.dialled(m.address) {
			p.mayBeLost(ctx, addr)
		}
	case *actor.Touched:
		for _, addr := range p.dialled(m.GetWho().GetAddress()) {
			p.answersLost(ctx, addr)
			delete(p.unsure, addr)
		}
	case *actor.DeadLetterResponse:
		// A request was not delivered (no connection to the node yet).
		addr := m.GetTarget().GetAddress()
		p.fail(addr, fmt.Errorf("%s: %w", addr, ErrNodeUnreachable))
	case *actor.Stopping:
		// The client closes: its calls still running on nodes are
		// cancelled there, and every request is answered.
		for k, w := range p.pending {
			if k.id != "" {
				ctx.Send(w.node, messages.Cancel(k.stream, k.id))
			}
			w.finish(func() { w.err = ErrClosed })
			delete(p.pending, k)
		}
	}
}

// mayBeLost marks the requests waiting on the node at addr as possibly
// lost with a connection from it, and asks the node for a sign of life
// (see the answersLost message).
func (p *proxy) mayBeLost(ctx actor.Context, addr string) {
	lost := false
	for _, w := range p.pending {
		if w.node.Address == addr {
			w.lost = true
			lost = true
		}
	}
	if lost {
		p.unsure[addr] = true
		ctx.Request(actor.NewPID(addr, ServiceName), &actor.Touch{})
	}
}

// learnSelf records that the node dialled at addr calls itself self, while
// its connection is open (see proxy.selves).
func (p *proxy) learnSelf(addr, self string) {
	if !p.open[addr] || self == "" {
		return
	}
	if self == addr {
		delete(p.selves, addr)
		return
	}
	p.selves[addr] = self
}

// dialled returns the addresses the client dialled for the node that
// names itself by addr: addr itself, and every node known to call itself
// addr (see proxy.selves).
func (p *proxy) dialled(addr string) []string {
	addrs := []string{addr}
	for dialled, self := range p.selves {
		if self == addr {
			addrs = append(addrs, dialled)
		}
	}
	return addrs
}

func (p *proxy) frame(f *messages.Frame) {
	switch f.GetType() {
	case messages.FrameType_TOOL_RESULT:
		key := callKey{f.GetStreamId(), f.GetToolCallId()}
		if w, ok := p.pending[key]; ok {
			delete(p.pending, key)
			p.serving(w.node.Address)
			w.finish(func() { w.result = f })
		}
	case messages.FrameType_DESCRIPTION:
		if w, ok := p.pending[callKey{f.GetStreamId(), ""}]; ok {
			w.descs = append(w.descs, f)
		}
	case messages.FrameType_END:
		key := callKey{f.GetStreamId(), ""}
		if w, ok := p.pending[key]; ok {
			if w.lost {
				// Its answer may have lost a part with a connection
				// from the node and come on over a new one: the END
				// does not make it whole. It is answered at the node's
				// sign of life (see answersLost).
				return
			}
			delete(p.pending, key)
			p.serving(w.node.Address)
			w.finish(func() { w.descriptions = w.descs })
		}
	}
}

// answersLost answers the requests to the node at addr whose answers were
// lost with a connection from it (see the answersLost message): each call
// with an error of kind KindConnectionLost, after a CANCEL (it may still
// run on the node, if the node has not seen the connection end), and each
// DESCRIBE with an error wrapping ErrConnectionLost. An answer from the
// node that comes later is dropped, as for any request answered.
func (p *proxy) answersLost(ctx actor.Context, addr string) {
	for k, w := range p.pending {
		if w.node.Address != addr || !w.lost {
			continue
		}
		delete(p.pending, k)
		if k.id == "" {
			w.finish(func() { w.err = describeLost(addr) })
			continue
		}
		ctx.Send(w.node, messages.Cancel(k.stream, k.id))
		f := messages.ToolError(k.stream, k.id, w.tool, fmt.Sprintf(
			"Tool %s was cancelled: the connection from its node ended before its result came (the call may have run)", w.tool))
		f.Meta.FailureKind = string(KindConnectionLost)
		w.finish(func() { w.result = f })
	}
}

// describeLost is the error of a DESCRIBE to the node at addr whose answer
// was lost with a connection from the node.
func describeLost(addr string) error {
	return fmt.Errorf("%s: the connection from the node ended before its whole answer came: %w", addr, ErrConnectionLost)
}

// watch watches the service actor of the node at addr, unless it is
// watched already. Only a node with a connection open is watched: a watch
// (like any message) makes protoactor open a connection when it has none,
// and a watch sent beside a request whose connection failed at once would
// open another, dialling the node twice for one call.
func (p *proxy) watch(ctx actor.Context, addr string) {
	if !p.watched[addr] {
		p.watched[addr] = true
		ctx.Watch(actor.NewPID(addr, ServiceName))
	}
}

// gone handles the going of the node at addr (with its connection, when
// connEnded; else its service stopped, its connection still open): the
// node is no longer watched, and every waiter on it is answered with
// ErrNodeUnreachable. A going is reported once: the node's Terminated
// (its service stopped) and the connection's end may both tell of it,
// and only the first finds the node watched (or waited on) still; the
// node is reported again once it has come back (a connection to it has
// opened, or it has answered a request: see serving). A node with no
// connection opened since it was last gone failed to open one: it is
// backed off, and reported only the first time; so is a node whose
// connection failed to open after the call that dialled it stopped
// waiting. A connection that stays open when the service stops is still
// open: the calls sent over it are not dials (the node serves again
// over it once its service is back).
func (p *proxy) gone(addr string, connEnded bool) {
	delete(p.unsure, addr) // its sign of life will not come
	if connEnded {
		delete(p.selves, addr) // the next connection may reach another node
	}
	if !p.watched[addr] && !p.dialling[addr] && !p.waitsOn(addr) {
		if connEnded {
			// Reported already (its service stopped first), or never
			// watched: the connection is gone all the same, and the
			// next call dials anew.
			delete(p.open, addr)
		}
		return
	}
	delete(p.watched, addr)
	delete(p.dialling, addr)
	opened := p.open[addr]
	why, err := "", fmt.Errorf("%s: %w", addr, ErrNodeUnreachable)
	if failure := p.failures[addr]; failure != nil && !opened {
		why = "the connection failed to open: " + openError(failure, p.tls)
		err = fmt.Errorf("%s (%s): %w", addr, why, ErrNodeUnreachable)
	} else if cut := p.cut[addr]; cut != "" && opened {
		why = cut
		err = fmt.Errorf("%s (%s): %w", addr, why, ErrNodeUnreachable)
	}
	p.fail(addr, err)
	if connEnded {
		delete(p.open, addr)
	}
	r, known := p.down[addr]
	if !known {
		r = &redial{at: p.now()}
		p.down[addr] = r
	}
	if !opened {
		r.failures++
		r.at = p.now().Add(p.wait(r.failures))
		r.why = why
	}
	if known {
		return
	}
	if why != "" {
		p.log.Info("tool node gone", "address", addr, "error", why)
	} else {
		p.log.Info("tool node gone", "address", addr)
	}
	if p.onGone != nil {
		p.onGone(addr)
	}
}

// serving tells p that the node at addr answered a request: if it was
// known gone (its service had stopped, or was not yet there, over a
// connection that stayed open), it has come back, and its next going is
// reported.
func (p *proxy) serving(addr string) { delete(p.down, addr) }

// sweep forgets the nodes known gone whose backoff passed more than max
// ago, but those a call waits on or a connection is opening to, so that
// the nodes gone are not kept for ever: a node forgotten is reported again
// when it is found gone again, and backed off as after its first failure.
// It runs at most once every max.
func (p *proxy) sweep() {
	now := p.now()
	if len(p.down) == 0 || now.Before(p.nextSweep) {
		return
	}
	p.nextSweep = now.Add(p.max)
	waited := map[string]bool{}
	for _, w := range p.pending {
		waited[w.node.Address] = true
	}
	for addr, r := range p.down {
		if now.After(r.at.Add(p.max)) && !waited[addr] && !p.dialling[addr] {
			delete(p.down, addr)
		}
	}
}

// wait is the backoff after the given number of failures to open a
// connection in a row: backoff, doubled for each failure after the first,
// up to max.
func (p *proxy) wait(failures int) time.Duration {
	if p.backoff <= 0 {
		return 0
	}
	d := p.backoff
	for range failures - 1 {
		if d >= p.max/2 {
			return p.max
		}
		d *= 2
	}
	return d
}

// waitsOn reports whether a waiter waits on the node at addr.
func (p *proxy) waitsOn(addr string) bool {
	for _, w := range p.pending {
		if w.node.Address == addr {
			return true
		}
	}
	return false
}

// fail completes every waiter on the node at addr with err.
func (p *proxy) fail(addr string, err error) {
	for k, w := range p.pending {
		if w.node.Address == addr {
			w.finish(func() { w.err = err })
			delete(p.pending, k)
		}
	}
}

// openError says why a connection failed to open, from gRPC's error (its
// message, without the status code around it), with a hint for the
// failures that a TLS on one side only, or from other CAs, makes
// (withTLS: the client's own).
func openError(err error, withTLS bool) string {
	msg := err.Error()
	if s, ok := status.FromError(err); ok {
		msg = s.Message()
	}
	switch {
	case withTLS && strings.Contains(msg, "remote error: tls:"):
		msg += "; the node refused the TLS handshake: the client's certificate must chain to the node's CAs"
	case !withTLS && strings.Contains(msg, "server preface"):
		msg += "; a node with TLS closes connections without it: see ClientOptions.TLS"
	}
	return msg
}

// ErrNodeAddress is the cause of the error [Client.Tools] returns for
// an address that is no node's: not a host:port with a port from 1 to
// 65535, or the client's own address.
var ErrNodeAddress = errors.New("not a tool node's address")
