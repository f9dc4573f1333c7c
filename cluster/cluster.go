package cluster

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pacluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"
	"github.com/asynkron/protoactor-go/eventstream"
	paremote "github.com/asynkron/protoactor-go/remote"
	"github.com/labstack/echo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/durability/pgstore"
	"github.com/polyweave/polyweave-go/internal/loopback"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/remote"
	"github.com/polyweave/polyweave-go/tools"
)

// Kind is the cluster kind of session actors.
const Kind = "polyweave-session"

// DefaultName is the cluster name when [Options].Name is empty.
const DefaultName = "polyweave"

// Defaults of [Options].
const (
	DefaultHold           = time.Second
	DefaultRequestTimeout = 5 * time.Second
	DefaultLinger         = time.Minute
	// DefaultStoreRetries asks again for a little over two minutes:
	// its 30 waits (100 ms doubled up to 3.2 s, then 24 of 5 s) add up
	// to 126.3 s, besides the time the failing attempts take, which
	// covers an ordinary PostgreSQL failover (a managed Multi-AZ
	// failover takes one to two minutes, Patroni's about 40 s).
	DefaultStoreRetries = 30
)

// SessionFunc builds the loop of session id on the member that activates
// it: the model stage and the loop's options (tools, prompts, …). The
// cluster sets the options' Session: its ID is id and its Store the
// member's fenced claim of the session in the shared store (Timeout,
// SnapshotEvery and BufferBytes of a Session given here are kept). It is
// called once per activation, on any member, so it must build the same
// loop for the same id everywhere.
type SessionFunc func(id string) (model actors.Spec, opts *tools.LoopOptions, err error)

// Options configures [Start]. Provider and Store are required; Session is
// required unless Client is set.
type Options struct {
	// Name is the cluster's name: members of one cluster share it.
	// Default DefaultName. With [Etcd] it may not hold a "/".
	Name string
	// Address is the host:port this process's protoactor remote listens
	// on; other members and clients must reach it there. Default
	// remote.DefaultAddress (loopback, a free port). An address beyond
	// loopback (another IP, every interface, a name that resolves
	// elsewhere) is refused with remote.ErrNotLoopback unless
	// AllowRemote is set.
	Address string
	// AllowRemote lets Address be beyond loopback, as members on other
	// machines need. Without TLS, members and clients have no
	// authentication: whoever reaches Address can activate sessions and
	// answer requests, so open it to a trusted network only.
	AllowRemote bool
	// TLS, when set, makes the member (or client) speak mutual TLS with
	// the others (see remote.TLS): only peers with a certificate that
	// chains to TLS.CAs can connect to it, and it connects only to such
	// peers, presenting its own certificate, which must name the host of
	// Address. Every member and client of the cluster needs one, from the
	// same CAs: a peer without it reaches no one. It covers the members'
	// protoactor remote (gRPC), which carries the requests and the
	// sessions' answers; not the provider's own traffic ([Automanaged]'s
	// health checks over HTTP, the Etcd provider's connection to etcd).
	// Nil: no TLS and no authentication.
	TLS *remote.TLS
	// Provider tells the members of the cluster: [Automanaged] for a
	// static list of hosts, [Etcd], or any protoactor cluster provider.
	// One provider value per Start: the member shuts it down when it
	// closes.
	Provider pacluster.ClusterProvider
	// Store is the store every member shares (a PostgreSQL database):
	// sessions are claimed and kept in it.
	Store *pgstore.Store
	// Session builds a session's loop when this member activates it.
	Session SessionFunc
	// Client joins without hosting sessions: the process reaches sessions
	// by id ([Member.Run]) but none is placed on it.
	Client bool
	// Hold is how long a session keeps a run request that it cannot
	// answer yet before it answers "still running" (and [Member.Run] asks
	// again). Shorter notices a dead member sooner, at more requests.
	// Default DefaultHold.
	Hold time.Duration
	// RequestTimeout bounds the wait for an answer beyond Hold: a request
	// to a member that died unanswered is given up after Hold +
	// RequestTimeout and sent again, to wherever the session is then.
	// Default DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Linger is how long a session that has ended stays active on its
	// member without a request before it stops (a later request
	// activates it again, which answers from the store). Zero means
	// DefaultLinger; negative stops it as soon as it has answered.
	Linger time.Duration
	// StoreRetries bounds how many times in a row Run asks again for a
	// session whose incarnation could not run because its store failed
	// (a claim or a write refused, the store's connections lost) with
	// an error that may pass. Each time it waits twice as long as the
	// time before, from 100 ms up to 5 s (the default's 30 retries wait
	// 126.3 s in all); once the bound is passed, Run fails with an error
	// wrapping [ErrStoreFailing]. An incarnation that has claimed the
	// session (the store took the claim's write) starts the count again;
	// one that answers it still runs while its claim is pending does
	// not, so a store whose claims fail slowly is bounded too. A store
	// that takes each claim and then fails the loop's writes slowly
	// (each failure after Hold) is not: every incarnation claims, and
	// Run asks again until its ctx ends. Zero means
	// DefaultStoreRetries; negative, none. A store that refuses the
	// session for good fails Run at once ([ErrStoreRefused]).
	StoreRetries int
	// KeepaliveTime is how long a connection to another member (or a
	// client) may stay quiet before this member pings it, and
	// KeepaliveTimeout how long it then waits for the answer: a peer
	// that does not answer is gone (its connection ends, as when it
	// dies), even when the connection never closes (a network cut, a
	// frozen process). Defaults remote.DefaultKeepaliveTime and
	// remote.DefaultKeepaliveTimeout, as remote.ClientOptions'; gRPC
	// pings at most every 10 s; negative KeepaliveTime: no pings. A
	// member lets its peers ping it that often; a member built before
	// members pinged allows one ping per 5 minutes and hangs up on a
	// peer that pings more often: while such members run, give the new
	// ones a negative KeepaliveTime.
	KeepaliveTime    time.Duration
	KeepaliveTimeout time.Duration
	// MaxFrameBytes bounds a frame this member sends to another member
	// or client: a run request (the session's whole first request, its
	// conversation included) and a session's answer. Run fails at once,
	// with an error wrapping remote.ErrTooLarge, for a request over its
	// member's limit (nothing is sent). A session whose answer is over
	// the limit of the member that hosts it has run (its tools and their
	// side effects happened): only the answer is withheld, kept in the
	// store, and Run fails with an error wrapping remote.ErrTooLarge
	// once the session ends. The error of a session that failed is not
	// withheld but clipped to fit (Run's error wraps ErrSessionFailed,
	// with the beginning of the session's). Whatever their limits,
	// members and clients take messages of up to 64 MiB from one
	// another (see "Sizes" in package remote), so a member may send
	// frames up to its own limit to peers with a lower one. Default
	// remote.DefaultMaxFrameBytes; at least remote.MinFrameBytes and at
	// most remote.MaxFrameBytesLimit (Start refuses others).
	MaxFrameBytes int
	// MaxConnsPerPeer bounds the connections one peer (an IP address)
	// may have open to the member at once, as
	// remote.NodeOptions.MaxConnsPerPeer does a node's: one more is
	// refused. Default remote.DefaultMaxConnsPerPeer; negative: no limit.
	MaxConnsPerPeer int
	// HeldMessageTimeout bounds how long the member holds a message not
	// yet whole (it holds a message's frames back from gRPC until the
	// whole message has come, see "Sizes" in package remote), as
	// remote.NodeOptions.HeldMessageTimeout does a node's: a connection
	// whose message is not whole this long after its first bytes is
	// closed, the peer told why (remote.ErrHeldTooLong, in an HTTP/2
	// GOAWAY) and the closing logged. Default
	// remote.DefaultHeldMessageTimeout; negative: no limit.
	HeldMessageTimeout time.Duration
	// Logger receives the member's logs and protoactor's; nil discards.
	Logger *slog.Logger
}

// Automanaged returns protoactor's automanaged provider for a static list
// of members: each member answers health checks over HTTP on port, and
// every member polls hosts (each member's host:port for those checks,
// this one's included) every refresh to learn which are up. A member
// answers them on the host of its own address ([Options].Address: on
// loopback unless AllowRemote), not on every interface, unless
// [HealthHost] says otherwise; hosts must name that host. A member that
// cannot listen there (another process holds the port) fails Start. A
// member that stops answering leaves the cluster within about refresh;
// one that was only paused is not taken back when it resumes (see
// [Member.Excluded]). refresh zero means two seconds. A client
// ([Options].Client) polls hosts and serves nothing; its port is unused.
func Automanaged(port int, hosts []string, refresh time.Duration, opts ...AutomanagedOption) pacluster.ClusterProvider {
	if refresh <= 0 {
		refresh = 2 * time.Second
	}
	// The provider's own HTTP server prints a line on stdout when it
	// starts, and listens on every interface; this one is quiet, listens
	// where StartMember says, and answers the same health checks.
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	p := &automanagedProvider{port: port, echo: e}
	for _, o := range opts {
		o(p)
	}
	if p.given != nil && port == 0 {
		if a, ok := p.given.Addr().(*net.TCPAddr); ok {
			port, p.port = a.Port, a.Port
		}
	}
	p.AutoManagedProvider = automanaged.NewWithTesting(refresh, port, e, hosts...)
	e.GET("/_health", func(ctx echo.Context) error {
		c := p.c.Load()
		if c == nil {
			return ctx.NoContent(http.StatusServiceUnavailable)
		}
		host, memberPort, err := c.ActorSystem.GetHostPort()
		if err != nil {
			return ctx.NoContent(http.StatusServiceUnavailable)
		}
		return ctx.JSON(http.StatusOK, automanaged.NewNode(c.Config.Name, c.ActorSystem.ID, host, memberPort, port, c.GetClusterKinds()))
	})
	return p
}

// AutomanagedOption configures [Automanaged].
type AutomanagedOption func(*automanagedProvider)

// HealthHost makes an [Automanaged] member answer health checks on host
// (an IP address or a name; "0.0.0.0" or "::" for every interface)
// instead of on the host of its own address. The health checks have no
// authentication: whoever reaches them learns the member's id, address
// and kinds.
func HealthHost(host string) AutomanagedOption {
	return func(p *automanagedProvider) { p.healthHost = host }
}

// HealthListener makes an [Automanaged] member answer health checks on l,
// a listener the caller has bound, instead of listening on port itself:
// bound on port 0, l has a free port that no other process can take
// before the member serves it, and its address tells the hosts to poll.
// Automanaged's port must be l's, or 0 for l's. From Start on, l is the
// member's: it closes it when it closes, or when its Start fails (a
// Start that fails before it reaches the provider, on a bad option, does
// not: closing l again is harmless). [HealthHost] does not apply.
func HealthListener(l net.Listener) AutomanagedOption {
	return func(p *automanagedProvider) { p.given = l }
}

// automanagedProvider is the pinned automanaged provider with a health
// endpoint of its own (see Automanaged).
type automanagedProvider struct {
	*automanaged.AutoManagedProvider
	port       int
	healthHost string       // HealthHost's; "" for the member's own host
	given      net.Listener // HealthListener's
	echo       *echo.Echo   // the health endpoint's server
	listener   net.Listener
	c          atomic.Pointer[pacluster.Cluster]
}

// StartMember listens for health checks, on the member's own host unless
// HealthHost said otherwise, and starts the pinned provider, which serves
// them on that listener.
func (p *automanagedProvider) StartMember(c *pacluster.Cluster) error {
	if p.given != nil {
		return p.serve(c, p.given)
	}
	host := p.healthHost
	if host == "" {
		h, _, err := c.ActorSystem.GetHostPort()
		if err != nil {
			return fmt.Errorf("cluster: automanaged provider: the member's host: %w", err)
		}
		host = h
	}
	addr := net.JoinHostPort(host, strconv.Itoa(p.port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("cluster: automanaged provider: health checks on %s: %w", addr, err)
	}
	return p.serve(c, l)
}

// serve starts the pinned provider, which serves health checks on l.
func (p *automanagedProvider) serve(c *pacluster.Cluster, l net.Listener) error {
	if a, ok := l.Addr().(*net.TCPAddr); ok && a.Port != p.port {
		l.Close()
		return fmt.Errorf("cluster: automanaged provider: HealthListener listens on port %d, but Automanaged was given port %d", a.Port, p.port)
	}
	p.listener, p.echo.Listener = l, l
	p.c.Store(c)
	if err := p.AutoManagedProvider.StartMember(c); err != nil {
		l.Close()
		return err
	}
	return nil
}

// Shutdown stops the pinned provider and closes the health checks'
// listener (the pinned provider's server closes it only once it has
// begun to serve).
func (p *automanagedProvider) Shutdown(graceful bool) error {
	err := p.AutoManagedProvider.Shutdown(graceful)
	if p.listener != nil {
		_ = p.listener.Close() // closed already when the server served it
	}
	if p.given != nil {
		_ = p.given.Close() // a Start that failed before StartMember
	}
	return err
}

// Member is this process in a cluster of session hosts: a protoactor
// cluster member (or client) whose sessions are virtual actors of kind
// [Kind], identified by session id. Safe for concurrent use; Close leaves
// the cluster.
type Member struct {
	rt         *actors.Runtime
	c          *pacluster.Cluster
	guard      *remote.Guard
	store      *pgstore.Store
	newSession SessionFunc
	provider   pacluster.ClusterProvider
	lookup     *lookup
	client     bool
	hold       time.Duration
	linger     time.Duration
	timeout    time.Duration
	maxFrame   int // Options.MaxFrameBytes, resolved
	retries    int // Options.StoreRetries, resolved
	log        *slog.Logger

	runs      runs            // session incarnations on this member
	calls     runs            // Run calls of this member
	closing   context.Context // ends when Close begins
	markClose context.CancelFunc
	excluded  context.Context // ends when the cluster has excluded this member
	exclude   context.CancelFunc
	left      chan struct{}             // closed once the excluded member has left (see Excluded)
	topoSub   *eventstream.Subscription // onTopology's

	sessionGens atomic.Uint64 // the last generation of a session actor's instance (see sessionActor)

	membersMu sync.Mutex
	members   []string // addresses of the members, from the last topology
	closeOnce sync.Once
	closed    chan struct{} // closed once the close that the first Close began is done
	closeErr  error         // its outcome, set before closed is closed
	// closeStage names what the close waits for (see setCloseStage).
	closeStage atomic.Pointer[string]
}

// unstartedAddress is the address of an actor system whose remote has not
// started listening: protoactor sets the listener's address, then creates
// the gRPC server, once net.Listen has succeeded.
const unstartedAddress = "nonhost"

// Start joins the cluster: it starts protoactor remote on opts.Address and
// the cluster member (or client), and returns once the member has
// registered with the provider. When it cannot listen on opts.Address
// (another process holds it) or cannot register, it returns an error that
// names the address, and leaves nothing running.
func Start(opts *Options) (m *Member, err error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if p, ok := o.Provider.(interface{ checkName(string) error }); ok {
		if err := p.checkName(cmp.Or(o.Name, DefaultName)); err != nil { // a provider of this package (Etcd)
			return nil, err
		}
	}
	switch {
	case o.Provider == nil:
		return nil, errors.New("cluster: no membership provider")
	case o.Store == nil:
		return nil, errors.New("cluster: no store")
	case o.Session == nil && !o.Client:
		return nil, errors.New("cluster: a member needs a Session function")
	case o.Hold < 0 || o.RequestTimeout < 0:
		return nil, errors.New("cluster: negative hold or request timeout")
	}
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.Address == "" {
		o.Address = remote.DefaultAddress
	}
	if o.Hold == 0 {
		o.Hold = DefaultHold
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.Linger == 0 {
		o.Linger = DefaultLinger
	}
	switch {
	case o.StoreRetries == 0:
		o.StoreRetries = DefaultStoreRetries
	case o.StoreRetries < 0:
		o.StoreRetries = 0
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	limits, err := remote.MessageLimits(o.MaxFrameBytes)
	if err != nil {
		return nil, fmt.Errorf("cluster: Options.MaxFrameBytes: %w", err)
	}
	if o.MaxFrameBytes == 0 {
		o.MaxFrameBytes = remote.DefaultMaxFrameBytes
	}
	// The dial options of the remote, the TLS credentials last: they
	// replace DialOptions' (none).
	dial := remote.DialOptions(o.KeepaliveTime, o.KeepaliveTimeout)
	// The server's credentials (TLS or none) bound what one peer's
	// connections can make the member hold, as a node's do.
	conns, err := remote.ConnServerOptionsHeld(o.Logger, o.MaxConnsPerPeer, o.HeldMessageTimeout, o.TLS)
	if err != nil {
		return nil, fmt.Errorf("cluster: Options.TLS: %w", err)
	}
	why := ": without TLS, a member has no authentication"
	if o.TLS != nil {
		_, tlsDial, err := o.TLS.GRPCOptions()
		if err != nil {
			return nil, fmt.Errorf("cluster: Options.TLS: %w", err)
		}
		dial = append(dial, tlsDial)
		why = ", whose peers need a certificate from Options.TLS.CAs"
	}
	if !o.AllowRemote {
		addr, err := loopback.ListenAddress(o.Address, remote.ErrNotLoopback)
		if errors.Is(err, remote.ErrNotLoopback) {
			return nil, fmt.Errorf("cluster: %w (set Options.AllowRemote for members on other machines%s)", err, why)
		} else if err != nil {
			return nil, fmt.Errorf("cluster: address %q: %w", o.Address, err)
		}
		o.Address = addr
	}
	host, portText, err := net.SplitHostPort(o.Address)
	if err != nil {
		return nil, fmt.Errorf("cluster: address %q: %w", o.Address, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("cluster: address %q: bad port", o.Address)
	}
	rt, err := actors.NewRuntime(&actors.RuntimeOptions{Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	m = &Member{
		rt: rt, guard: remote.NewGuard(o.Logger), store: o.Store, newSession: o.Session,
		provider: o.Provider, lookup: newLookup(o.RequestTimeout), client: o.Client, hold: o.Hold, timeout: o.RequestTimeout, maxFrame: o.MaxFrameBytes, linger: o.Linger, retries: o.StoreRetries, log: o.Logger,
	}
	m.closing, m.markClose = context.WithCancel(context.Background())
	m.excluded, m.exclude = context.WithCancel(context.Background())
	m.left = make(chan struct{})
	m.closed = make(chan struct{})
	// Pings as the remote package's nodes and clients ping, and allows
	// their pings (and its peers'); bounds its gRPC messages as they do
	// (after the server and dial options, which replace what the limits
	// add to), so that a batch of requests or answers never passes a
	// peer's limit, which would end the connection. With TLS, it speaks
	// mutual TLS both ways; it bounds each peer's connections as they do.
	server := append(m.guard.ServerOptions(), remote.PingPolicy())
	server = append(server, conns...)
	rcfg := paremote.Configure(host, port, paremote.WithServerOptions(server...),
		paremote.WithDialOptions(dial...),
		paremote.WithEndpointWriterQueueSize(1024), limits)
	// A member that cannot be reached is given up after one attempt:
	// requests to a dead member fail fast and go elsewhere.
	rcfg.MaxRetryCount = 1
	kind := pacluster.NewKind(Kind, actor.PropsFromProducer(m.newSessionActor))
	ccfg := pacluster.Configure(o.Name, o.Provider, m.lookup, rcfg,
		pacluster.WithKinds(kind), pacluster.WithRequestTimeout(o.Hold+o.RequestTimeout))
	m.c = pacluster.New(rt.System(), ccfg)
	if p, ok := o.Provider.(interface{ useLogger(*slog.Logger) }); ok {
		p.useLogger(o.Logger) // a provider of this package (Etcd)
	}
	defer func() {
		// The pinned cluster panics when it cannot listen or register.
		if p := recover(); p != nil {
			_ = m.shutdownProvider()
			if m.c.Remote != nil && rt.System().Address() != unstartedAddress {
				// Only a remote that listens has a server to stop: one
				// that could not listen panicked before it had one.
				remote.StopRemote(rt.System(), m.c.Remote, m.guard)
			}
			_ = rt.Close(context.Background())
			if perr, ok := p.(error); ok {
				err = fmt.Errorf("cluster: start on %s: %w", o.Address, perr)
			} else {
				err = fmt.Errorf("cluster: start on %s: %v", o.Address, p)
			}
			m = nil
		}
	}()
	m.topoSub = rt.System().EventStream.Subscribe(m.onTopology)
	if o.Client {
		m.c.StartClient()
	} else {
		m.c.StartMember()
	}
	// The remote has started: its address is known (see remote.Guard).
	m.guard.SetAddress(rt.System().Address())
	m.log.Info("cluster member started", "address", m.Address(), "cluster", o.Name, "client", o.Client)
	return m, nil
}

// Address returns the host:port of this member's remote.
func (m *Member) Address() string { return m.rt.System().Address() }

// System returns the member's protoactor actor system, for code that
// drops down to protoactor.
func (m *Member) System() *actor.ActorSystem { return m.rt.System() }

// Cluster returns the member's protoactor cluster.
func (m *Member) Cluster() *pacluster.Cluster { return m.c }

// Members returns the addresses of the cluster's members as this member
// currently sees them (none before the provider has told it any). Safe
// to call at any time, also while the members change.
func (m *Member) Members() []string {
	m.membersMu.Lock()
	defer m.membersMu.Unlock()
	return slices.Clone(m.members)
}

// onTopology keeps the member's own copy of the members (see Members)
// and watches for its exclusion. It runs for each topology protoactor
// publishes, in the goroutine that updates protoactor's member list and
// under its lock: protoactor's list, which its provider replaces without
// a lock that others can take, must not be read anywhere else.
func (m *Member) onTopology(ev any) {
	t, ok := ev.(*pacluster.ClusterTopology)
	if !ok {
		return
	}
	members := make([]string, 0, len(t.Members))
	for _, mem := range t.Members {
		members = append(members, mem.Address())
	}
	m.membersMu.Lock()
	m.members = members
	m.membersMu.Unlock()
	if !m.client {
		m.watchExclusion(t)
	}
}

// ErrExcluded is the cause of the error Run returns once the cluster has
// excluded its member for good (see [Member.Excluded]), also while the
// member leaves and after it has left.
var ErrExcluded = errors.New("member excluded from the cluster")

// Excluded returns a channel that is closed when the cluster has excluded
// this member for good while it was not closing, and the member has left:
// its own view of the members no longer counts it, so it could host no
// session, and the other members refuse its connections. The pinned
// protoactor never takes a member id back once a member saw it leave, as
// happens to a member that was paused (a stopped process, a long garbage
// collection, a migrated VM) or cut off (a partition) for longer than its
// provider's failure detection (with [Etcd], its lease of about three
// seconds): when it is back, it registers again under the same id, and
// is not counted, however healthy it is.
//
// So an excluded member leaves, as Close makes it leave: from the moment
// it learns it is excluded, its Runs fail with an error wrapping
// [ErrExcluded] (those in progress too); it stops its sessions (each is
// taken over by the next request for it, on another member),
// deregisters from its provider, and stops listening on its address and
// its health port; then Excluded's channel is closed, and Close returns
// at once (with the error of that leaving, if any). Its host should then
// start a new member in its place (a new [Start], with a new provider:
// it may take the same address and health port), which joins under a new
// id and hosts sessions again. A client's channel is never closed.
func (m *Member) Excluded() <-chan struct{} { return m.left }

// watchExclusion makes the member leave (see Excluded) when topology t
// says that it left, unless it is closing (a member that closes leaves).
func (m *Member) watchExclusion(t *pacluster.ClusterTopology) {
	if m.closing.Err() != nil || m.excluded.Err() != nil {
		return
	}
	self := m.rt.System().ID
	for _, left := range t.Left {
		// Providers name a member by its actor system's id, or (Etcd)
		// by the cluster's name and that id: "name@id".
		if left.Id == self || strings.HasSuffix(left.Id, "@"+self) {
			m.log.Error("cluster member excluded: the cluster no longer counts this member, which leaves; start a new member in its place (a new Start joins under a new id)",
				"address", m.Address(), "member", self)
			m.exclude()
			// Not here: this is the provider's goroutine, which Close
			// stops.
			go m.leave()
			return
		}
	}
}

// leave closes the excluded member (see Excluded), then closes Excluded's
// channel.
func (m *Member) leave() {
	defer close(m.left)
	ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
	defer cancel()
	if err := m.Close(ctx); err != nil {
		m.log.Error("the excluded cluster member could not leave cleanly", "address", m.Address(), "error", err)
	}
}

// leaveTimeout bounds the wait of an excluded member for its sessions and
// its runtime to stop as it leaves.
const leaveTimeout = time.Minute

// Dropped counts the incoming messages refused because they could not be
// decoded safely (see package remote).
func (m *Member) Dropped() int64 { return m.guard.Dropped() }

// Result is a session's outcome, as [Member.Run] returns it.
type Result struct {
	// Text is the final answer: the text the model gave after the last
	// tool call.
	Text string
	// Member is the address of the member whose incarnation of the
	// session answered.
	Member string
	// Epoch is that incarnation's claim epoch: 1 for a session that ran
	// on one member from start to end, one more for each activation after
	// the first (on another member, or again after a stop).
	Epoch uint64
	// Requests counts the run requests sent, retries included.
	Requests int
}

// ErrSessionFailed is the cause of the error Run returns for a session
// that ended in failure (its loop's error, a bad request): asking again
// does not help. A store that fails is not a failed session: when the
// session cannot be claimed, or its loop failed after a call to the store
// did (a write refused, the store's connections lost), the incarnation
// stops without keeping an answer and Run asks again (see
// [Options].StoreRetries); the next incarnation resumes the session from
// the store. A store that refuses the session for good fails Run at once
// ([ErrStoreRefused]).
var ErrSessionFailed = errors.New("session failed")

// ErrStoreRefused is the cause of the error Run returns when the store
// refuses the session for good: it refuses the session's claim or writes
// with an error that asking again cannot cure (see
// durability.IsPermanent; with PostgreSQL, SQLSTATE 42501
// insufficient_privilege). A read-only database (25006
// read_only_sql_transaction, as during a failover) may pass: it is asked
// again, within [Options].StoreRetries. The error quotes the store's.
var ErrStoreRefused = errors.New("the store refuses the session")

// ErrStoreFailing is the cause of the error Run returns when the
// session's store failed more times in a row than [Options].StoreRetries
// allows, with errors that might have passed. The error quotes the last.
var ErrStoreFailing = errors.New("the store keeps failing")

// ErrClosed is the cause of the error Run returns when its member has
// begun to close ([Member.Close]), whether the Run was in progress then or
// started later: the member cannot reach sessions any more. The session
// goes on elsewhere; a Run from another member gets its answer.
var ErrClosed = errors.New("member closed")

// Run runs session id to its end and returns its result. request is the
// session's first request: PARAM frames (the "messages" PARAM, and any
// other the model reads); their stream ids are ignored. The session is
// activated on the member the cluster places it on; when that member dies
// or the session moves, Run asks again and the session resumes on its new
// member from the shared store: tool calls that completed are not run
// again, calls that were interrupted are answered as interrupted (see
// tools.SessionOptions). A session that has ended answers with its stored
// answer, so Run may be called again for the same id, from any member.
// Every call for one id must pass the same request.
//
// Run gives up as soon as ctx ends, also while the session holds its
// request, and returns an error wrapping ctx's; the session itself goes
// on (a later Run gets its answer). A failed session is an error wrapping
// [ErrSessionFailed]. A session id that the store cannot hold (empty, not
// valid UTF-8, or longer than [MaxSessionIDLen] bytes) fails Run at once,
// before anything is sent or claimed, with an error wrapping
// durability.ErrInvalidName; a session whose member's store is closed
// fails it with one wrapping durability.ErrClosed, and one whose store
// refuses the session for good with one wrapping [ErrStoreRefused], since
// asking again does not help either; a store that keeps failing with
// errors that may pass fails it after [Options].StoreRetries times in a
// row, with one wrapping [ErrStoreFailing]. Run returns as soon as its
// member begins to close, with an error wrapping [ErrClosed], and as soon
// as the cluster has excluded its member, with one wrapping
// [ErrExcluded]. A request over the member's frame limit
// ([Options].MaxFrameBytes) fails Run at once, before anything is sent,
// with an error wrapping remote.ErrTooLarge. A session whose answer is
// over the frame limit of the member that hosts it runs to its end (its
// tools' side effects happen); its answer is kept in the store, not sent,
// and Run then fails with an error wrapping remote.ErrTooLarge. A failed
// session whose error is too long for that limit is still a failed
// session: its error is clipped to fit.
func (m *Member) Run(ctx context.Context, id string, request ...*messages.Frame) (*Result, error) {
	if err := checkSessionID(id); err != nil {
		return nil, fmt.Errorf("cluster: run: %w", err)
	}
	var req runRequest
	for _, f := range request {
		if f.GetType() != messages.FrameType_PARAM {
			return nil, fmt.Errorf("cluster: run session %s: the request holds a %s frame; only PARAM frames", shortID(id), f.GetType())
		}
		req.Params = append(req.Params, param{Name: f.GetName(), Value: f.GetPayload()})
	}
	frame, err := runFrame(id, req)
	if err != nil {
		return nil, fmt.Errorf("cluster: run session %s: %w", shortID(id), err)
	}
	if n := proto.Size(frame); n > m.maxFrame {
		return nil, fmt.Errorf("cluster: run session %s: the request is %d bytes, over the member's frame limit of %d (Options.MaxFrameBytes): %w",
			shortID(id), n, m.maxFrame, remote.ErrTooLarge)
	}
	if !m.calls.add() {
		if m.excluded.Err() != nil {
			return nil, fmt.Errorf("cluster: run session %s on %s: %w: start a new member in its place", shortID(id), m.Address(), ErrExcluded)
		}
		return nil, fmt.Errorf("cluster: run session %s: %w", shortID(id), ErrClosed)
	}
	defer m.calls.done()
	// Every wait below ends when ctx ends or the member begins to close.
	callerCtx := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopClosing := context.AfterFunc(m.closing, cancel)
	defer stopClosing()
	stopExcluded := context.AfterFunc(m.excluded, cancel)
	defer stopExcluded()
	var last error
	backoff := 20 * time.Millisecond
	storeFailures := 0 // incarnations in a row that could not run: their store failed
	for n := 1; ; n++ {
		if err := callerCtx.Err(); err != nil {
			return nil, fmt.Errorf("cluster: run session %s: %w (last answer: %v)", shortID(id), err, last)
		}
		if m.excluded.Err() != nil { // before closing: an excluded member closes
			return nil, fmt.Errorf("cluster: run session %s on %s: %w: start a new member in its place (last answer: %v)", shortID(id), m.Address(), ErrExcluded, last)
		}
		if m.closing.Err() != nil {
			return nil, fmt.Errorf("cluster: run session %s: %w (last answer: %v)", shortID(id), ErrClosed, last)
		}
		resp, err := m.request(ctx, id, frame)
		if err != nil && ctx.Err() != nil {
			continue // gave up waiting: say so above, with the answer before
		}
		st, perr := parseStatus(resp, err, id)
		switch {
		case errors.Is(perr, errOtherSession):
			// Not this session's answer: one meant for a request of an
			// earlier process at this address (whose futures had the
			// same names), or the cached activation is another
			// session's. Forget the activation and ask again.
			m.c.PidCache.Remove(id, Kind)
			last = perr
		case perr != nil:
			last = perr
		case st.State == stateDone:
			return &Result{Text: st.Text, Member: st.Member, Epoch: st.Epoch, Requests: n}, nil
		case st.State == stateFailed:
			return nil, fmt.Errorf("cluster: run session %s (on %s, epoch %d): %s: %w", shortID(id), st.Member, st.Epoch, st.Error, ErrSessionFailed)
		case st.State == stateRefused:
			return nil, fmt.Errorf("cluster: run session %s (on %s): %s: %w", shortID(id), st.Member, st.Error, refusal(st.Cause))
		case st.State == stateRunning:
			if st.Claimed {
				// It claimed the session: the store worked. One
				// that still waits on its claim proves nothing (a
				// store may fail slowly, after Hold), so the count
				// and the wait go on.
				backoff = 20 * time.Millisecond
				storeFailures = 0
			}
			continue
		case st.State == stateRetry:
			// The incarnation could not run (its store failed with
			// an error that may pass) and has stopped: ask again, for
			// a new one, waiting longer each time, a bounded number of
			// times in a row.
			m.c.PidCache.Remove(id, Kind)
			last = fmt.Errorf("session could not run on %s: %s", st.Member, st.Error)
			if storeFailures++; storeFailures > m.retries {
				return nil, fmt.Errorf("cluster: run session %s: %w: %d times in a row (Options.StoreRetries %d); the last: %v",
					shortID(id), ErrStoreFailing, storeFailures, m.retries, last)
			}
			backoff = storeBackoff(storeFailures)
		default: // moved: ask again, where the session is now
			// The incarnation that answered has stopped: a request to
			// it would be a dead letter.
			m.c.PidCache.Remove(id, Kind)
			last = fmt.Errorf("session moved from %s (epoch %d): %s", st.Member, st.Epoch, st.Error)
		}
		// No answer, or the incarnation stopped: wait a little for the
		// cluster to settle (a dead member to leave), then ask again.
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// storeBackoff is how long Run waits before it asks again after the
// n-th incarnation in a row whose store failed: 100 ms, doubled each
// time, up to 5 s.
func storeBackoff(n int) time.Duration {
	const first, most = 100 * time.Millisecond, 5 * time.Second
	if n > 6 {
		return most
	}
	return min(first<<(n-1), most)
}

// request sends a run request to session id's activation (the cached
// one, or the one its owner gives) and returns the answer. It fails when
// there is no activation, when no answer comes within Hold +
// RequestTimeout (the activation is then forgotten, as it is when the
// request could not be delivered), or as soon as ctx ends.
func (m *Member) request(ctx context.Context, id string, frame *messages.Frame) (any, error) {
	pid, _ := m.c.PidCache.Get(id, Kind)
	if pid == nil {
		if pid = m.lookup.get(ctx, pacluster.NewClusterIdentity(id, Kind)); pid == nil {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return nil, errors.New("no activation of the session: its owner did not give one")
		}
		m.c.PidCache.Set(id, Kind, pid)
	}
	sys := m.rt.System()
	resp, err := await(ctx, sys, sys.Root.RequestFuture(pid, frame, m.hold+m.timeout))
	if errors.Is(err, actor.ErrTimeout) || errors.Is(err, actor.ErrDeadLetter) {
		m.c.PidCache.Remove(id, Kind)
	}
	return resp, err
}

// await returns f's answer, or ctx's error as soon as ctx ends: then it
// completes f itself (a late answer goes to the dead letters), so that
// nothing is left waiting for it.
func await(ctx context.Context, sys *actor.ActorSystem, f *actor.Future) (any, error) {
	if ctx.Done() == nil {
		return f.Result()
	}
	var resp any
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err = f.Result()
	}()
	select {
	case <-done:
		return resp, err
	case <-ctx.Done():
		sys.Root.Stop(f.PID()) // a future's Stop completes it: the goroutine ends
		<-done
		return nil, ctx.Err()
	}
}

// errOtherSession is the cause of parseStatus's error for the status of
// another session than the one asked.
var errOtherSession = errors.New("the answer of another session")

// parseStatus reads the answer to a run request of session id.
func parseStatus(resp any, err error, id string) (*status, error) {
	if err != nil {
		return nil, err
	}
	f, ok := resp.(*messages.Frame)
	if !ok || f.GetName() != metaStatus {
		return nil, fmt.Errorf("unexpected answer %T", resp)
	}
	if f.GetStreamId() != id {
		// A stale activation that refused the request says why.
		var st status
		if json.Unmarshal(f.GetPayload(), &st) == nil && st.State == stateMoved && st.Error != "" {
			return nil, fmt.Errorf("%w (%q): %s", errOtherSession, f.GetStreamId(), st.Error)
		}
		return nil, fmt.Errorf("%w (%q)", errOtherSession, f.GetStreamId())
	}
	var st status
	if err := json.Unmarshal(f.GetPayload(), &st); err != nil {
		return nil, fmt.Errorf("bad status: %w", err)
	}
	return &st, nil
}

// Close leaves the cluster: it stops answering health checks, stops the
// sessions it hosts (each is taken over by the next request for it,
// elsewhere: an incarnation stopped mid-step resumes from its last stored
// step), and shuts the remote and the runtime down. It waits for them or
// until ctx ends: then it returns an error wrapping ctx's that names what
// the close still waits for, and the close goes on. The store is the
// caller's. Every Run of this member, in progress or later, returns as
// soon as Close begins, with an error wrapping [ErrClosed]. A member that
// the cluster excluded leaves by itself (see [Member.Excluded]): Close
// waits until it has, and returns the error of its leaving, if any. Every
// Close waits so for the one close that the first began (whether the
// earlier ones gave up or not), or until its own ctx ends; once the close
// is done, Close returns its outcome, whatever ctx.
func (m *Member) Close(ctx context.Context) error {
	m.closeOnce.Do(func() {
		m.markClose() // ends every Run at once: see ErrClosed
		m.setCloseStage("leaving the cluster")
		// Not bound by this ctx: a close cut short would leave the
		// sessions and the runtime stopping with no one to wait for
		// them, and a later Close nothing to wait on.
		go func() {
			defer close(m.closed)
			m.closeErr = m.close()
		}()
	})
	select {
	case <-m.closed: // done: its outcome, whatever ctx
		return m.closeErr
	default:
	}
	select {
	case <-m.closed:
		return m.closeErr
	case <-ctx.Done():
		return fmt.Errorf("cluster: close: the member is still closing (%s; the close goes on, and a later Close waits for it): %w",
			*m.closeStage.Load(), ctx.Err())
	}
}

// setCloseStage records what the close waits for (see Close).
func (m *Member) setCloseStage(stage string) { m.closeStage.Store(&stage) }

// close is the close that the first Close began (see Close): it waits
// for as long as the sessions and the runtime take to stop.
func (m *Member) close() error {
	ctx := context.Background()
	if m.topoSub != nil {
		m.rt.System().EventStream.Unsubscribe(m.topoSub)
	}
	var errs []error
	if !m.client {
		m.c.Gossip.SetState(pacluster.GracefullyLeftKey, &emptypb.Empty{})
	}
	errs = append(errs, m.shutdownProvider())
	// The Runs return (ErrClosed) before the sessions stop: a
	// session that stops answers its waiters, and the pinned
	// protoactor's futures take an answer without a lock, so an
	// answer to a future that a Run is giving up at that moment
	// would race with it.
	m.setCloseStage("waiting for the Runs to return")
	m.calls.close()
	if err := m.calls.wait(ctx); err != nil {
		errs = append(errs, fmt.Errorf("runs: %w", err))
	}
	// Poisons the placement actor, which poisons every session.
	m.setCloseStage("waiting for the sessions to stop")
	m.c.IdentityLookup.Shutdown()
	m.runs.close()
	if err := m.runs.wait(ctx); err != nil {
		errs = append(errs, fmt.Errorf("sessions: %w", err))
	}
	m.setCloseStage("stopping the remote")
	if !m.client {
		m.c.Gossip.Shutdown()
	}
	remote.StopRemote(m.rt.System(), m.c.Remote, m.guard)
	m.setCloseStage("stopping the runtime")
	errs = append(errs, m.rt.Close(ctx))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cluster: close: %w", err)
	}
	return nil
}

func (m *Member) shutdownProvider() (err error) {
	defer func() {
		// The pinned cluster's providers may panic on shutdown.
		if p := recover(); p != nil {
			err = fmt.Errorf("provider shutdown: %v", p)
		}
	}()
	return m.provider.Shutdown(true)
}

// runs counts running work (session incarnations, Run calls) so that
// Close can wait for it; it refuses new work once closed.
type runs struct {
	mu     sync.Mutex
	wg     sync.WaitGroup
	closed bool
}

// Go runs fn in a goroutine and counts it, unless r is closed.
func (r *runs) Go(fn func()) bool {
	if !r.add() {
		return false
	}
	go func() {
		defer r.done()
		fn()
	}()
	return true
}

// add counts one more piece of work, unless r is closed; done ends it.
func (r *runs) add() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.wg.Add(1)
	return true
}

func (r *runs) done() { r.wg.Done() }

func (r *runs) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
}

func (r *runs) wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("still running: %w", ctx.Err())
	}
}
