package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/supervisor"
)

// ErrClosed is returned by a [Runtime] or [Conn] used after Close.
var ErrClosed = errors.New("actors: closed")

// ErrNameTaken is returned (wrapped) by [Runtime.Start] and [Runtime.Spawn]
// for a [Spec.Durable] duplex whose name is already in use in the runtime:
// a durable duplex keeps its name, which is part of its persistence key.
var ErrNameTaken = errors.New("actors: durable duplex name taken")

// ErrNoName is returned (wrapped) by [Runtime.Start] and [Runtime.Spawn]
// for a [Spec.Durable] duplex without a Name.
var ErrNoName = errors.New("actors: durable duplex without a name")

// ErrHostStopped is returned (wrapped) by [Runtime.Start] and
// [Runtime.Spawn] once the runtime's top-level supervisor is stopping or
// gone: its host actor stopped it (see RuntimeOptions.Parent). A Start
// made while the supervisor restarts waits for the restart, and gets it
// when the supervisor is stopped instead.
var ErrHostStopped = errors.New("actors: runtime host stopped")

// DefaultHostName is the default name of the runtime's top-level
// supervisor.
const DefaultHostName = "polyweave"

// RuntimeOptions configure a [Runtime]. A nil *RuntimeOptions or a zero
// field means the default.
type RuntimeOptions struct {
	// Logger receives the runtime's logs and protoactor's own; default:
	// discard. The runtime never touches the global logger. Every stage
	// gets it from its Context (with its actor id), and every supervision
	// decision is a WARN record. protoactor's INFO records (actor system
	// started, [ACTOR] Recovering, [DeadLetter]) are lowered to DEBUG
	// unless ProtoactorInfo is set.
	Logger *slog.Logger
	// ProtoactorInfo keeps protoactor's INFO records at INFO.
	ProtoactorInfo bool
	// Supervision supervises the duplexes started with [Runtime.Start] and,
	// unless a [Spec] says otherwise, every duplex's children. Default:
	// supervisor.New(nil) (one-for-one, 10 restarts in 10 s).
	Supervision *supervisor.Strategy
	// OnSupervision observes every supervision decision in the runtime,
	// including those of strategies given in specs, before it is carried
	// out. A restart is told as it is carried out: after its backoff, if
	// any, with the children it restarts as the event's Affected. It
	// leaves out a child that stopped, or is stopping, since the decision
	// (a warning is logged: the restart is dropped), and a failed child
	// with a stop written into it (Context.Stop) waiting in its queue:
	// the stop wins, the child's incarnation ends at the restart as at
	// that stop, and it stops, not restarted by this restart or a later
	// one. A restart that restarts no child is not told. It must be
	// quick and safe for concurrent use (a restart after a backoff is
	// told on a timer's goroutine). A panic of it is logged (an ERROR
	// record to Logger) and the decision is carried out all the same.
	OnSupervision func(supervisor.Event)
	// Dispatcher schedules mailboxes; default: a pool of worker goroutines
	// owned by the runtime, as many as GOMAXPROCS taking queued mailbox
	// runs one after the other (no fresh goroutine per run, whose stack
	// would grow again each time, and no goroutine switch between runs
	// under load), and more when runs wait while a worker is stuck in one
	// run, so a run that blocks never holds up another for long (about a
	// millisecond).
	Dispatcher actor.Dispatcher
	// SpawnTimeout bounds how long Start waits for the host to spawn a
	// duplex (a host restarting holds the spawn until it has started
	// again: see Parent); default 10 s. A Start that gave up waiting
	// started nothing: its duplex is not spawned later.
	SpawnTimeout time.Duration
	// Parent, when set, embeds the runtime in a host's actor tree instead
	// of starting an actor system of its own: the runtime's top-level
	// supervisor is spawned with Parent, on Parent's actor system. Give it
	// the actor.Context of a host actor (from its Receive) to make the
	// supervisor that actor's child: the host actor's supervisor strategy
	// then decides about the runtime's escalations, and stopping the host
	// actor stops every duplex of the runtime (each open stream is closed
	// with ERROR and END). Give it the system's Root to run beside the
	// host's actors. With a Parent, the default Supervision escalates a
	// failure past its restart intensity to the host (see
	// supervisor.Options.EscalateWhenExceeded) rather than stopping the
	// duplex: a Resume of the host actor's strategy then resumes the
	// duplexes whose failure was escalated, each answering the call
	// that failed it (failure kind [FailedKind]) as its own supervisor's
	// Resume would, a restart or stop stops them. A restart of the
	// runtime's supervisor (for an escalated failure, or for a sibling's
	// under an all-for-one strategy) stops every duplex, and a Start or
	// Spawn made meanwhile waits until the supervisor has started again
	// (at most SpawnTimeout) and starts its duplex under it, or fails
	// with [ErrHostStopped] when the supervisor is stopped instead.
	// Close stops the runtime's actors and leaves the system running;
	// Logger receives the runtime's logs only (protoactor's go to the
	// system's own logger).
	Parent actor.SpawnerContext
	// Name is the top-level supervisor's actor name; default
	// [DefaultHostName]. Two runtimes embedded under one parent need
	// different names. Persistence keys of durable duplexes are actor
	// paths, which start with it.
	Name string
}

// Runtime owns an actor system and its top-level supervisor: the host of
// every duplex started through it. Its methods are safe for concurrent use.
// Close stops everything it started.
type Runtime struct {
	system       *actor.ActorSystem
	host         *actor.PID
	logger       *slog.Logger
	strategy     actor.SupervisorStrategy
	observe      func(supervisor.Event)
	dispatcher   actor.Dispatcher
	pool         *workerPool // the default dispatcher, stopped by Close
	spawnTimeout time.Duration
	tasks        tasks
	jobs         *jobPool      // runs the goroutines of Context.Go
	embedded     bool          // the system is the host's: Close leaves it running
	hostGone     chan struct{} // closed when the host actor has stopped
	hostGoneOnce sync.Once
	watch        watch // its duplexes and their watchers (observe.go)
	// hostCell carries the host's mailbox, and the spawn requests it
	// holds while it restarts, from one incarnation to the next (see
	// host).
	hostCell *hostCell

	closeOnce sync.Once
	closeErr  error
}

// NewRuntime starts an actor system with a top-level supervisor actor, or,
// with RuntimeOptions.Parent, spawns the supervisor in a host's system.
func NewRuntime(opts *RuntimeOptions) (*Runtime, error) {
	var o RuntimeOptions
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.SpawnTimeout < 0 {
		return nil, fmt.Errorf("actors: negative spawn timeout %v", o.SpawnTimeout)
	}
	if o.SpawnTimeout == 0 {
		o.SpawnTimeout = 10 * time.Second
	}
	if o.Supervision == nil {
		o.Supervision = supervisor.MustNew(&supervisor.Options{EscalateWhenExceeded: o.Parent != nil})
	}
	if o.Name == "" {
		o.Name = DefaultHostName
	}
	if strings.Contains(o.Name, "/") {
		return nil, fmt.Errorf("actors: runtime name %q contains a slash", o.Name)
	}
	logger := o.Logger
	var system *actor.ActorSystem
	spawner := o.Parent
	if spawner == nil {
		system = actor.NewActorSystem(
			actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return protoactorLogger(logger, o.ProtoactorInfo) }),
			actor.WithDeadLetterThrottleInterval(100*time.Millisecond),
		)
		spawner = system.Root
	} else if system = spawner.ActorSystem(); system == nil {
		return nil, errors.New("actors: parent has no actor system")
	}
	rt := &Runtime{
		system:       system,
		logger:       logger,
		observe:      o.OnSupervision,
		dispatcher:   o.Dispatcher,
		spawnTimeout: o.SpawnTimeout,
		embedded:     o.Parent != nil,
		hostGone:     make(chan struct{}),
		jobs:         newJobPool(),
	}
	if rt.dispatcher == nil {
		rt.pool = newWorkerPool(defaultThroughput, 0, defaultMaxWorkers)
		rt.dispatcher = rt.pool
	}
	rt.strategy = rt.observed(o.Supervision)
	// protoactor ignores WithSupervisor on top-level actors: the host's own
	// failures go to an explicit guardian, which stops it (its children are
	// then stopped too, and their streams closed with ERROR and END). As a
	// host actor's child, its parent supervises it and the guardian is
	// not used.
	popts := []actor.PropsOption{actor.WithSupervisor(rt.strategy)}
	if !rt.embedded {
		guardian := rt.observed(supervisor.MustNew(&supervisor.Options{MaxRestarts: supervisor.NoRestarts}))
		popts = append(popts, actor.WithGuardian(guardian))
	}
	// The host's mailbox is a duplex's: it tells the host of a Resume
	// (see host.resumed).
	rt.hostCell = &hostCell{}
	popts = append(popts, actor.WithMailbox(rt.hostCell.producer()))
	props := actor.PropsFromProducer(func() actor.Actor { return &host{rt: rt} }, popts...)
	host, err := spawner.SpawnNamed(props, o.Name)
	if err != nil {
		if !rt.embedded {
			system.Shutdown()
		}
		return nil, fmt.Errorf("actors: spawn host: %w", err)
	}
	rt.host = host
	return rt, nil
}

// observed is s reporting its decisions to the runtime's watchers, its
// directives reaching only the children it decided about (see
// decidingStrategy).
func (rt *Runtime) observed(s *supervisor.Strategy) actor.SupervisorStrategy {
	return decidingStrategy{inner: s, rt: rt}
}

// Logger returns the runtime's logger.
func (rt *Runtime) Logger() *slog.Logger { return rt.logger }

// System is the protoactor actor system behind the runtime, for code that
// drops down to protoactor (remote, cluster, metrics).
func (rt *Runtime) System() *actor.ActorSystem { return rt.system }

// Host is the runtime's top-level supervisor actor: the parent of every
// duplex started with [Runtime.Start] or [Runtime.Spawn].
func (rt *Runtime) Host() *actor.PID { return rt.host }

// props are the props of a duplex emitting to subscriber; up is the
// mailbox of its parent when the subscriber is the parent (see shell.Emit).
func (rt *Runtime) props(spec Spec, subscriber *actor.PID, up *mailbox) *actor.Props {
	strategy := rt.strategy
	if spec.Supervision != nil {
		strategy = rt.observed(spec.Supervision)
	}
	cell := &mailboxCell{}
	opts := []actor.PropsOption{actor.WithSupervisor(strategy), actor.WithMailbox(cell.producer())}
	if d := spec.Dispatcher; d != nil {
		opts = append(opts, actor.WithDispatcher(d))
	} else if rt.dispatcher != nil {
		opts = append(opts, actor.WithDispatcher(rt.dispatcher))
	}
	return actor.PropsFromProducer(func() actor.Actor { return newShell(rt, spec, subscriber, cell, up) }, opts...)
}

// spawnRequest asks the host to spawn a top-level duplex.
type spawnRequest struct {
	spec       Spec
	subscriber *actor.PID
	reply      chan<- spawnReply // buffered: the host never blocks on it
	// gone is closed when the parent's incarnation the request was made
	// for has ended: a shell then refuses it (a child spawned while it
	// stops would never be stopped, and its stop would wait forever).
	gone <-chan struct{}
	// watch: the subscriber (a Conn's port, a Mux) watches the duplex,
	// to learn when it stops (see spawnChild).
	watch bool
	// claimed is set by the parent as it spawns the duplex, or by the
	// caller whose wait for the reply ended first (SpawnTimeout, the
	// parent gone): whichever comes first. A request its caller gave up
	// on spawns nothing, and one the parent took is answered, so the
	// caller waits for that answer (see spawnUnder).
	claimed atomic.Bool
}

type spawnReply struct {
	pid *actor.PID
	err error
}

// host is the top-level supervisor: the parent of every started duplex.
type host struct {
	rt  *Runtime
	seq int // numbers given to names in use
	// escalated are the duplexes whose failure the runtime's strategy
	// escalated to the host's parent (see RuntimeOptions.Parent),
	// suspended until it decides about the host: a Resume of the host
	// resumes them (see resumed); a restart or stop stops them with it.
	escalated []escalatedChild
	// stopping: the host's Stop was taken, its children told to stop. A
	// stopped actor's mailbox is suspended no more (see mailbox.stop):
	// spawn requests still come while its children stop.
	stopping bool
	// restarting: the host's Restart was taken, its children told to
	// stop; its next incarnation starts once they have. A host
	// restarted with a sibling that failed (its parent's strategy
	// all-for-one) did not fail itself, and its mailbox is not
	// suspended: spawn requests still come, and are held until the next
	// incarnation starts (see hostCell.held).
	restarting bool
}

// hostCell is the mailboxCell of the host, with the spawn requests its
// incarnation held while it restarted, in the order they came: the next
// incarnation serves them as it starts, before any later request, and a
// stop of the host refuses them.
type hostCell struct {
	mailboxCell
	held []*spawnRequest
}

// hold holds req. The requests whose callers gave up waiting (see
// spawnRequest.claimed) go as the list fills: a long restart holds
// those of callers still waiting, however many Starts it takes.
func (c *hostCell) hold(req *spawnRequest) {
	if len(c.held) == cap(c.held) {
		c.held = slices.DeleteFunc(c.held, func(r *spawnRequest) bool { return r.claimed.Load() })
		if len(c.held) > cap(c.held)/2 {
			// Mostly waiting: grow, so that the next drop is as far off.
			c.held = slices.Grow(c.held, len(c.held))
		}
	}
	c.held = append(c.held, req)
}

func (h *host) Receive(ctx actor.Context) {
	cell := h.rt.hostCell
	switch m := ctx.Message().(type) {
	case *spawnRequest:
		switch {
		case h.stopping:
			// Spawned now, the duplex would be a child the host never
			// stops: it would wait for it forever, or leave it running
			// without a parent when it took the name of one stopped.
			m.reply <- spawnReply{err: ErrHostStopped}
		case h.restarting:
			// Spawned now, the duplex would be a child the restart
			// never stops, and the restart, which waits for the
			// host's children to stop, would wait for it.
			cell.hold(m)
		default:
			h.rt.spawnChild(ctx, m, &h.seq)
		}
	case *actor.Started:
		// A restart's incarnation is made (see mailbox.restarting).
		cell.mb.incarnations++
		held := cell.held
		cell.held = nil
		for _, req := range held {
			h.rt.spawnChild(ctx, req, &h.seq)
		}
	case *actor.Restarting:
		h.restarting = true
	case resumed:
		h.resumed()
	case *actor.Stopping:
		h.stopping = true
		for _, req := range cell.held {
			req.reply <- spawnReply{err: ErrHostStopped}
		}
		cell.held = nil
	case *actor.Stopped:
		h.rt.hostGoneOnce.Do(func() { close(h.rt.hostGone) })
	}
}

// resumed carries out a Resume of the host by its parent's strategy,
// after the host escalated a duplex's failure: the decision was about
// that failure, and the duplexes whose failure was escalated are resumed
// in turn, as a duplex's own supervisor resuming it would (the call that
// failed it answered with an ERROR of failure kind [FailedKind]).
func (h *host) resumed() {
	resumeEscalated(h.escalated, h.rt.system.ProcessRegistry)
	h.escalated = nil
}

// keepEscalated implements escalationKeeper.
func (h *host) keepEscalated(c escalatedChild) { h.escalated = append(h.escalated, c) }

// spawnChild answers req by spawning its duplex as a child of ctx's
// actor (the host, or the actor a [Parent] names). seq numbers the
// names in use.
func (rt *Runtime) spawnChild(ctx actor.Context, req *spawnRequest, seq *int) {
	if !req.claimed.CompareAndSwap(false, true) {
		return // its caller gave up waiting (a host restarting held it)
	}
	props := rt.props(req.spec, req.subscriber, nil)
	name := req.spec.Name
	switch {
	case req.spec.Durable() && name == "":
		req.reply <- spawnReply{err: fmt.Errorf("%w: its name is part of its persistence key: set Spec.Name (the stage's Name option)", ErrNoName)}
		return
	case name == "":
		pid := ctx.Spawn(props)
		rt.watchFor(req, pid)
		req.reply <- spawnReply{pid: pid}
		return
	}
	pid, err := ctx.SpawnNamed(props, name)
	if errors.Is(err, actor.ErrNameExists) && req.spec.Durable() {
		err = fmt.Errorf("%w: %q is running already (a durable duplex keeps its name, part of its persistence key: stop the other one first, or give this one another name)", ErrNameTaken, name)
	}
	// A name in use gets a number: any number of duplexes of one spec can
	// run side by side. Numbers are not reused while the parent lives.
	for err != nil && errors.Is(err, actor.ErrNameExists) {
		*seq++
		pid, err = ctx.SpawnNamed(props, name+"-"+strconv.Itoa(*seq+1))
	}
	if err == nil {
		rt.watchFor(req, pid)
	}
	req.reply <- spawnReply{pid: pid, err: err}
}

// watchFor has req's subscriber watch pid, just spawned, when req asks
// for it. It is done here, in the parent's turn, not by the caller once
// the reply has come: a duplex that fails as it starts may be stopped by
// then (its supervisor's decision taken), out of the process registry,
// and a Watch could no longer reach it, nor its Terminated come; or its
// id may be a newer duplex's. Here the id is pid's own (only this parent
// spawns under it), and a duplex that stopped itself already is reported
// stopped at once.
func (rt *Runtime) watchFor(req *spawnRequest, pid *actor.PID) {
	if !req.watch {
		return
	}
	reg := rt.system.ProcessRegistry
	if proc, ok := reg.Get(pid); ok {
		proc.SendSystemMessage(pid, &actor.Watch{Watcher: req.subscriber})
	} else if sub, ok := reg.Get(req.subscriber); ok {
		sub.SendSystemMessage(req.subscriber, &actor.Terminated{Who: pid})
	}
}

// spawn starts spec under the host and returns its PID.
func (rt *Runtime) spawn(spec Spec, subscriber *actor.PID, watch bool) (*actor.PID, error) {
	return rt.spawnUnder(rt.host, rt.hostGone, spec, subscriber, watch)
}

// spawnUnder starts spec as a child of parent, an actor that answers
// spawn requests (the host, a shell), and returns its PID. gone is closed
// when parent has stopped. With watch, subscriber watches the duplex
// from its start.
func (rt *Runtime) spawnUnder(parent *actor.PID, gone <-chan struct{}, spec Spec, subscriber *actor.PID, watch bool) (*actor.PID, error) {
	if spec.New == nil {
		return nil, errors.New("actors: spec has no New function")
	}
	if rt.tasks.isClosed() {
		return nil, ErrClosed
	}
	// The reply comes on a channel, not a future: a host that its parent
	// stopped may hold the request in a suspended mailbox until it is
	// gone, and nothing must wait for the timeout then.
	replies := make(chan spawnReply, 1)
	req := &spawnRequest{spec: spec, subscriber: subscriber, reply: replies, gone: gone, watch: watch}
	rt.system.Root.Send(parent, req)
	timer := time.NewTimer(rt.spawnTimeout)
	defer timer.Stop()
	var reply spawnReply
	var failed error
	select {
	case reply = <-replies:
	case <-gone:
		failed = ErrHostStopped
		if parent != rt.host {
			failed = ErrParentStopped
		}
		failed = fmt.Errorf("actors: spawn %q: %w", spec.Name, failed)
	case <-timer.C:
		failed = fmt.Errorf("actors: spawn %q: no answer from the runtime's host within %v", spec.Name, rt.spawnTimeout)
	}
	if failed != nil {
		if req.claimed.CompareAndSwap(false, true) {
			return nil, failed // the parent will spawn nothing for it
		}
		// The parent is spawning the duplex: its answer is on its way.
		reply = <-replies
	}
	if reply.err != nil {
		return nil, fmt.Errorf("actors: spawn %q: %w", spec.Name, reply.err)
	}
	return reply.pid, nil
}

// Close stops every duplex of the runtime (their open streams are closed
// with ERROR and END), waits for the work they started with Context.Go to
// return, and shuts the actor system down. It returns when all of that is
// done, however long the duplexes take to stop, or with ctx's error when
// ctx ends first. Close is idempotent: later calls return the first
// call's result.
func (rt *Runtime) Close(ctx context.Context) error {
	rt.closeOnce.Do(func() { rt.closeErr = rt.close(ctx) })
	return rt.closeErr
}

func (rt *Runtime) close(ctx context.Context) error {
	rt.tasks.close()
	var errs []error
	// The host may have stopped before (its parent stopped it, say).
	if err := awaitGone(ctx, rt.hostGone, func() { rt.system.Root.Stop(rt.host) }); err != nil {
		errs = append(errs, fmt.Errorf("stop host: %w", err))
	}
	jobsErr := rt.tasks.wait(ctx)
	if jobsErr != nil {
		errs = append(errs, jobsErr)
	}
	rt.jobs.close(jobsErr == nil) // a job that outlived ctx is left to end on its own
	if !rt.embedded {
		rt.system.Shutdown()
	}
	if rt.pool != nil {
		rt.pool.close()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("actors: close: %w", err)
	}
	return nil
}

// tasks counts goroutines started with Context.Go so that Close can wait
// for them, and names the actors that started them; unlike a WaitGroup it
// refuses new tasks once closing.
type tasks struct {
	mu     sync.Mutex
	n      int
	by     map[string]int // the tasks running, by the id of the actor that started them
	closed bool
	idle   chan struct{} // closed when n drops to 0 after close
}

// add counts a task of the actor owner, unless closing.
func (t *tasks) add(owner string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.n++
	if t.by == nil {
		t.by = map[string]int{}
	}
	t.by[owner]++
	return true
}

func (t *tasks) done(owner string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n--
	if t.by[owner]--; t.by[owner] == 0 {
		delete(t.by, owner)
	}
	if t.n == 0 && t.idle != nil {
		close(t.idle)
		t.idle = nil
	}
}

func (t *tasks) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

func (t *tasks) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
}

// wait waits for every task to end, or returns an error naming the
// actors whose tasks still run when ctx ends first.
func (t *tasks) wait(ctx context.Context) error {
	t.mu.Lock()
	if t.n == 0 {
		t.mu.Unlock()
		return nil
	}
	if t.idle == nil {
		t.idle = make(chan struct{})
	}
	idle := t.idle
	t.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
	}
	t.mu.Lock()
	n, owners := t.n, make([]string, 0, len(t.by))
	if n == 0 { // the last ended as ctx did
		t.mu.Unlock()
		return nil
	}
	for owner, k := range t.by {
		owners = append(owners, fmt.Sprintf("%s (%d)", owner, k))
	}
	t.mu.Unlock()
	slices.Sort(owners)
	const most = 10
	if len(owners) > most {
		owners = append(owners[:most], fmt.Sprintf("and %d more", len(owners)-most))
	}
	return fmt.Errorf("%d background task(s) still running, started by %s: %w", n, strings.Join(owners, ", "), ctx.Err())
}
