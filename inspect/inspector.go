package inspect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
	"github.com/polyweave/polyweave-go/tools"
)

// Defaults of [Options].
const (
	DefaultInterval = 250 * time.Millisecond
	DefaultRefresh  = 2 * time.Second
	DefaultFeedSize = 200
	DefaultClip     = 240
	// DefaultMaxSessions is how many sessions are kept by default.
	DefaultMaxSessions = 100
	// FlashFor is how long a node that restarted is marked as flashing.
	FlashFor = 5 * time.Second
	// KeepEnded is how long the tree keeps showing an actor that stopped
	// after a restart or a failure (a sub-agent's tool that crashed in a
	// delegation now over, say), with the ancestors that stopped with it,
	// marked ended (see [Node.Ended]); the newest maxEnded at most.
	KeepEnded = 5 * time.Minute
	// maxEnded bounds the ended actors kept.
	maxEnded = 100
	// latencySamples is how many recent latencies per tool the
	// percentiles are computed over.
	latencySamples = 512
)

// Options configure [New]. A nil *Options or a zero field means the
// default.
type Options struct {
	// Title is the page's title; default "Polyweave inspector".
	Title string
	// AllowRemote serves clients that are not on a loopback address, Host
	// headers that are not loopback names, and requests a proxy forwarded
	// (with a Forwarded, X-Forwarded-For, -Host, -Proto or -Port,
	// X-Real-IP or Via header: a proxy on this machine connects from
	// loopback, whoever its client is). Default: refused (403). The Host
	// is then not checked: a page of another site that a browser able to
	// reach the inspector opens can rebind its name to the inspector's
	// address (DNS rebinding) and read it, and post faults, as its own
	// origin; serve it behind a proxy that answers only the names it is
	// reached by.
	AllowRemote bool
	// Faults enables the fault injection endpoints and the page's buttons
	// for them. Default: absent.
	Faults bool
	// Interval is the shortest time between two snapshots sent to one
	// event stream client; default [DefaultInterval]. The streams look
	// for changes every 50 ms (the inspector's clock): the interval is
	// rounded up to a multiple of 50 ms. A stream with nothing new gets a
	// snapshot every second anyway (ages move on), or every Interval if
	// that is longer.
	Interval time.Duration
	// Refresh is how often the page refreshes itself without JavaScript;
	// default [DefaultRefresh].
	Refresh time.Duration
	// FeedSize is how many feed items are kept; default [DefaultFeedSize].
	FeedSize int
	// Clip is how many bytes of a tool call's arguments or a message are
	// shown; default [DefaultClip].
	Clip int
	// MaxSessions bounds the sessions (and durability positions) kept: past
	// it, the oldest (first seen first) with no stream open are forgotten.
	// Default [DefaultMaxSessions].
	MaxSessions int
}

// Inspector observes a runtime and serves the live view (see the package
// doc). Its methods are safe for concurrent use.
type Inspector struct {
	// The fields every hook on the hot path writes come first, within
	// 64 bytes, where they straddled three cache lines: the hooks run on
	// the workers of the adapter and of the loop in turn, usually two
	// cores, and each line they share is taken from the other core at
	// every hook.
	mu sync.Mutex
	// version is bumped at every change the page shows (by the hooks on
	// the hot path, once for the records a fold shows: see logged).
	version atomic.Uint64
	// log holds what the hooks on the hot path recorded and the fold has
	// not shown yet, in order (see fold); at most foldAt records.
	log []record
	// folds counts the folds: an adapter's observer whose frames were
	// recorded before the last one may write over them (see
	// modelObserver.flush).
	folds uint64

	rt   *actors.Runtime
	opts Options
	// actors reads the runtime's registry of live actors (rt.Actors).
	actors func() []actors.ActorInfo

	unwatch []func()
	closed  chan struct{}
	// closing is done at Close, for what ends then without a goroutine
	// of its own waiting (see serveEvents).
	closing    context.Context
	endClosing context.CancelFunc
	once       sync.Once
	clock      coarseClock // for ages and moments; latencies read time.Now

	// timed counts the response ENDs recorded timed and not folded yet,
	// and the pending calls timed (dispatched): while there are some, a
	// tool result reads the clock (its call may be one).
	timed int
	// dirty are the adapters' observers whose frames the log's records
	// hold: the fold drops them once shown (see modelObserver.dropShown).
	dirty    []*modelObserver
	feed     []FeedItem // ring of the newest opts.FeedSize items
	feedNext uint64     // sequence number of the next item
	flashes  map[string]time.Time
	// ended are the stopped actors the tree keeps showing (see
	// KeepEnded), by id; endedOrder their ids, oldest first.
	ended       map[string]endedActor
	endedOrder  []string
	stopped     [stoppedRing]endedActor // ring of the newest actors that stopped quietly
	stoppedNext int
	// decided is a ring of the newest supervisors' decisions about
	// children gone from the runtime's registry whose stop had not been
	// reported yet (see supervisionEvent), each taken by that stop.
	decided     [stoppedRing]decision
	decidedNext int
	// failures are the times of the last failures reported of the live
	// actors whose past the inspector knows (zero: none), each dropped at
	// its stop (see failureReported, failureNews).
	failures map[string]time.Time
	models   map[string]bool // spec names of the observed model adapters
	modelsBy map[string]*modelObserver
	index    sessionIndex // the sessions kept, by id
	results  sessionCache // the session of the last tool result, or of the session made last
	spare    *session     // a forgotten session, reset, for the next one
	// sessionOrder are the sessions, storeOrder the keys of stores, first
	// seen first (for forget): rings, so that forgetting the oldest and
	// adding the newest reuse the same slot.
	sessionOrder ring[*session]
	storeOrder   ring[string]
	tools        map[string]*toolStats
	toolList     []*toolStats // the same, by index (pendingCall.tool); a dropped row's index is the next row's
	// registered are the names of the tools given to Tools (the host's);
	// unregistered counts the rows of other names (see toolStats).
	registered   map[string]bool
	unregistered int
	stalls       map[string]*stall
	stores       map[string]storePosition
	restarts     int
	// uses counts the tool results shown and the rows of figures made:
	// the order of toolStats.used.
	uses uint64

	// building, when set (by tests), is called where a snapshot's view
	// is built from what was copied of the state.
	building func()
}

// New makes an inspector of rt and starts watching it. Close stops
// watching and ends the event streams.
func New(rt *actors.Runtime, o *Options) (*Inspector, error) {
	return newInspector(rt, o, nil)
}

// newInspector is New; watching, when set (by tests), is called once
// the inspector watches the runtime, before it reads the actors alive.
func newInspector(rt *actors.Runtime, o *Options, watching func()) (*Inspector, error) {
	if rt == nil {
		return nil, errors.New("inspect: nil runtime")
	}
	var opts Options
	if o != nil {
		opts = *o
	}
	switch {
	case opts.Interval < 0, opts.Refresh < 0, opts.FeedSize < 0, opts.Clip < 0, opts.MaxSessions < 0:
		return nil, fmt.Errorf("inspect: negative option in %+v", opts)
	}
	if opts.Title == "" {
		opts.Title = "Polyweave inspector"
	}
	if opts.Interval == 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Refresh == 0 {
		opts.Refresh = DefaultRefresh
	}
	if opts.FeedSize == 0 {
		opts.FeedSize = DefaultFeedSize
	}
	if opts.Clip == 0 {
		opts.Clip = DefaultClip
	}
	if opts.MaxSessions == 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	in := &Inspector{rt: rt, opts: opts, actors: rt.Actors, closed: make(chan struct{}),
		flashes: map[string]time.Time{}, failures: map[string]time.Time{}, ended: map[string]endedActor{}, models: map[string]bool{}, modelsBy: map[string]*modelObserver{},
		tools: map[string]*toolStats{}, stalls: map[string]*stall{}, registered: map[string]bool{},
		stores: map[string]storePosition{}, log: newLog()}
	in.closing, in.endClosing = context.WithCancel(context.Background())
	in.unwatch = append(in.unwatch, rt.WatchActors(in.actorEvent), rt.WatchSupervision(in.supervisionEvent))
	if watching != nil {
		watching()
	}
	// The failures reported before: a stop reporting one of them is no
	// news. Read after watching, so that none is missed; an event
	// watched already is newer (and written under in.mu). An actor that
	// stopped between the two is in neither: its past is not known, and
	// its stop tells nothing (see failureNews).
	in.mu.Lock()
	for _, a := range rt.Actors() {
		if _, ok := in.failures[a.ID]; !ok {
			in.failures[a.ID] = a.LastFailureAt
		}
	}
	in.mu.Unlock()
	return in, nil
}

// Close stops watching the runtime, releases stalled tool calls and ends
// the event streams being served, those whose client stopped reading
// included (their writes fail at once). The page then shows nothing new,
// and no tool can be stalled ([ErrClosed]).
func (in *Inspector) Close() {
	in.once.Do(func() {
		for _, stop := range in.unwatch {
			stop()
		}
		close(in.closed)
		in.endClosing()
		in.clock.close()
		in.mu.Lock()
		for _, s := range in.stalls {
			s.set(false)
		}
		in.mu.Unlock()
	})
}

func (in *Inspector) changed() { in.version.Add(1) }

// logged is called by a hook about to leave a record in the log, with
// in.mu held: the first record since the log was folded bumps the
// version, the others find it bumped already. A stream that read the
// version before that record (see serveEvents) finds it moved; one that
// read it after takes in.mu for its snapshot, which folds the log, so
// that every record left since is shown. One locked instruction a batch
// rather than one a hook: on the hot path, they are the costly part of
// a hook.
func (in *Inspector) logged() {
	if len(in.log) == 0 {
		in.version.Add(1)
	}
}

// foldAt is how many records the hooks leave before the one that
// leaves the last folds them: the fold's code then runs for many
// records in a row, its instructions in the cache, where run at every
// turn they competed with the runtime's for it (they were a third of
// what the hooks cost a run of figure 7's conversation).
const foldAt = 64

// record is what a hook on the hot path leaves for the fold: a turn of
// an adapter (see modelObserver.flush), or a tool result. It fits in a
// cache line (the log's array is aligned to them, see newLog): the
// hooks that write records run on the workers of the adapter and of the
// loop in turn, usually on two cores, and each record written is a line
// taken from the other core.
type record struct {
	o *modelObserver  // the adapter whose turn it is; nil for a tool result
	f *messages.Frame // a result's call
	// x is, for a turn, the "messages" PARAM staged before it (handed
	// over, shown at its request's END; alone, for a turn without
	// frames: see flushStaged), or nil; for a tool result, its
	// TOOL_RESULT.
	x      *messages.Frame
	stream string // a tool result's stream
	now    int64  // the coarse time of the turn
	// at is monoNow at a turn's response END timed, or at a tool result
	// while some calls were timed; 0 otherwise.
	at time.Duration
	// first and n place the turn's frames in its observer's buffer (see
	// Inspector.recorded).
	first, n int32
}

// newLog returns the log's array, empty, foldAt records long (the hooks
// fold it when full, so it never grows), its records each on a cache
// line of their own where the allocator allows it. An array of records
// is larger than 512 bytes and holds pointers: the allocator places it
// 8 bytes into a line (after a header of its type), and each record
// straddled two lines, one of them shared with the next record, which
// the other core may write. The padded array starts its records on the
// next line; if the allocator places it otherwise (another version of
// the runtime), the plain array is taken, wherever it lies: the pad
// would then only move the records off their lines.
func newLog() []record {
	if log, ok := logOf(new(paddedLog)); ok {
		return log
	}
	return new([foldAt]record)[:0]
}

// logOf returns the log of the padded array p, empty, if its records
// start on a line.
func logOf(p *paddedLog) ([]record, bool) {
	if !lineAligned(unsafe.Pointer(&p.records[0])) {
		return nil, false
	}
	return p.records[:0], true
}

// paddedLog is a log whose records start on a line (see newLog).
type paddedLog struct {
	_       [64 - 8]byte
	records [foldAt]record
}

func lineAligned(p unsafe.Pointer) bool { return uintptr(p)%64 == 0 }

// lock takes in.mu and shows what the hooks recorded (see fold): every
// reader, and every hook that is not on the hot path, sees all that
// came before it.
func (in *Inspector) lock() {
	in.mu.Lock()
	if len(in.log) > 0 {
		in.fold()
	}
}

// fold shows the records the hooks left, in the order they were left;
// in.mu must be held.
func (in *Inspector) fold() {
	log := in.log
	for i := 0; i < len(log); {
		r := &log[i]
		if r.o == nil {
			in.toolResult(tools.ToolResultEvent{StreamID: r.stream, Call: r.f, Result: r.x}, "", r.at)
			i++
			continue
		}
		r.o.applyRecord(r, in.recorded(r))
		i++
	}
	for _, o := range in.dirty { // shown: not kept reachable by an observer idle from now on
		o.dropShown()
	}
	clear(in.dirty)
	in.dirty = in.dirty[:0]
	clear(log) // nor by the log
	in.log = log[:0]
	in.folds++
}

// recorded returns the frames of the turn r records, in its observer's
// own buffer (see modelObserver.flush); in.mu must be held.
func (in *Inspector) recorded(r *record) []observed { return r.o.logged[r.first : r.first+r.n] }

// FeedItem is one entry of the live feed.
type FeedItem struct {
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	// Kind is "supervision", "restart", "stop" (an actor stopped after
	// a failure its supervisor had not decided about yet), "tool",
	// "breaker", "model", "approval" or "fault".
	Kind string `json:"kind"`
	// Actor is the actor concerned, when there is one.
	Actor string `json:"actor,omitempty"`
	Text  string `json:"text"`
	// Alert marks failures.
	Alert bool `json:"alert,omitempty"`
}

// addFeed appends an item; in.mu must be held.
func (in *Inspector) addFeed(it FeedItem) {
	it.Seq = in.feedNext
	in.feedNext++
	if it.Time.IsZero() {
		it.Time = time.Now()
	}
	if len(in.feed) < in.opts.FeedSize {
		in.feed = append(in.feed, it)
	} else {
		in.feed[it.Seq%uint64(in.opts.FeedSize)] = it
	}
}

// feedNewest returns up to n items, newest first; in.mu must be held.
func (in *Inspector) feedNewest(n int) []FeedItem {
	out := make([]FeedItem, 0, min(n, len(in.feed)))
	for seq := in.feedNext; seq > 0 && len(out) < n && len(out) < len(in.feed); seq-- {
		out = append(out, in.feed[(seq-1)%uint64(in.opts.FeedSize)])
	}
	return out
}

func (in *Inspector) actorEvent(ev actors.ActorEvent) {
	a := ev.Actor
	in.lock()
	switch a.State {
	case actors.ActorRestarting:
		in.restarts++
		in.flashes[a.ID] = ev.Time
		in.addFeed(FeedItem{Time: ev.Time, Kind: "restart", Actor: a.ID, Alert: true,
			Text: fmt.Sprintf("%s restarted (restart %d)%s", a.ID, a.Restarts, failureSuffix(a.LastFailure))})
	case actors.ActorRunning:
		// A supervisor's decision is reported with the incarnation that
		// failed, often running: nothing runs again then.
		if ev.Decision {
			break
		}
		// The path runs again: it replaces the record of its end and,
		// started afresh (a first incarnation, with no failure yet), the
		// records under it. A restart is a new incarnation: what its past
		// children left (a finished delegation's crash) is history, kept.
		fresh := a.Restarts == 0 && a.LastFailure == nil
		if len(in.ended) > 0 {
			in.dropEnded(a.ID, fresh)
		}
		if in.decidedNext > 0 && fresh {
			in.takeDecision(a.ID) // started afresh: a decision waiting was about its past
		}
	case actors.ActorStopped:
		// A stop by a supervisor is in the feed as its decision; others
		// are the normal end of a duplex (a delegation's loop, say), or
		// the stop of one that failed before its supervisor decided
		// (stopped by its stopping parent meanwhile): that failure was
		// reported by no event before, and the decision, taken after,
		// is told to no one when it is a restart. The feed says so.
		delete(in.flashes, a.ID)
		if in.failureNews(a) {
			in.addFeed(FeedItem{Time: ev.Time, Kind: "stop", Actor: a.ID, Alert: true,
				Text: fmt.Sprintf("%s stopped after failing, before its supervisor decided%s", a.ID, failureSuffix(a.LastFailure))})
		}
		delete(in.failures, a.ID)
		in.actorEnded(a, ev.Time)
	}
	if a.State != actors.ActorStopped {
		in.failureReported(a)
	}
	in.mu.Unlock()
	in.changed()
}

// failureReported keeps the last failure a reports, live, if the
// inspector knows its past: from its start, or from when the inspector
// read the actors alive (New). An event of an actor that stopped
// meanwhile (a supervisor's decision about it, reported on the
// supervisor's goroutine, may come after its stop) leaves nothing
// behind. in.mu must be held.
func (in *Inspector) failureReported(a actors.ActorInfo) {
	if a.State == actors.ActorRunning && a.Restarts == 0 && a.LastFailure == nil {
		in.failures[a.ID] = time.Time{} // started: no failure yet
	} else if _, known := in.failures[a.ID]; known {
		in.failures[a.ID] = a.LastFailureAt
	}
}

// failureNews reports whether a, stopped, reports a failure that no
// event reported before (its supervisor's decision comes before the
// restart or stop it leads to, and a restart reports the failure it
// follows). An actor whose past is not known, one that stopped as the
// inspector started (before it read the actors alive), is no news: the
// failure it reports may be an old one. in.mu must be held.
func (in *Inspector) failureNews(a actors.ActorInfo) bool {
	if a.LastFailure == nil {
		return false
	}
	at, known := in.failures[a.ID]
	return known && !at.Equal(a.LastFailureAt)
}

// decision is a supervisor's decision about a failure of child, for
// its stop reported after it.
type decision struct {
	child  string
	reason error
	at     time.Time
}

// endedActor is an actor that stopped, kept in the tree.
type endedActor struct {
	info actors.ActorInfo
	at   time.Time // when it stopped
	loop bool      // it was an agent loop (a model adapter's parent)
}

// stoppedRing is how many of the newest actors that stopped quietly are
// remembered, for the ancestors of one kept after them (a delegation's
// loop stops before its children).
const stoppedRing = 32

// actorEnded keeps a that stopped in the tree when it had restarted or
// failed, with its ancestors that stopped with it (the loop of the
// delegation it crashed in): so the crash of a sub-agent stays in sight
// after its delegation ends. in.mu must be held.
func (in *Inspector) actorEnded(a actors.ActorInfo, at time.Time) {
	if in.models[a.Name] {
		if e, ok := in.ended[a.Parent]; ok {
			e.loop = true
			in.ended[a.Parent] = e
		}
	}
	if a.LastFailure == nil && in.decidedNext > 0 {
		if d, ok := in.takeDecision(a.ID); ok {
			a.LastFailure, a.LastFailureAt = d.reason, d.at
		}
	}
	e := endedActor{info: a, at: at, loop: in.stoppedModelUnder(a.ID)}
	if a.Restarts == 0 && a.LastFailure == nil && !in.endedUnder(a.ID) {
		in.stopped[in.stoppedNext%stoppedRing] = e
		in.stoppedNext++
		return
	}
	in.keepWithAncestors(e)
}

// takeDecision returns and forgets the decision waiting for the stop of
// child, if any; in.mu must be held.
func (in *Inspector) takeDecision(child string) (decision, bool) {
	for i := range min(in.decidedNext, stoppedRing) {
		if d := &in.decided[i]; d.child == child {
			out := *d
			*d = decision{}
			return out, true
		}
	}
	return decision{}, false
}

// keepWithAncestors keeps e in the tree with its ancestors that stopped
// quietly before it was kept (a delegation's loop may stop before the
// crashed actor under it is known to have crashed). in.mu must be held.
func (in *Inspector) keepWithAncestors(e endedActor) {
	in.keepEnded(e)
	for parent := e.info.Parent; ; {
		if _, kept := in.ended[parent]; kept {
			return
		}
		p, ok := in.stoppedActor(parent)
		if !ok {
			return
		}
		p.loop = p.loop || in.stoppedModelUnder(parent) // its model adapter may have stopped after it
		in.keepEnded(p)
		parent = p.info.Parent
	}
}

// keepEnded adds e to the ended actors shown; in.mu must be held.
func (in *Inspector) keepEnded(e endedActor) {
	id := e.info.ID
	if _, ok := in.ended[id]; ok {
		in.endedOrder = slices.DeleteFunc(in.endedOrder, func(o string) bool { return o == id })
	}
	in.ended[id] = e
	in.endedOrder = append(in.endedOrder, id)
	for len(in.endedOrder) > maxEnded {
		delete(in.ended, in.endedOrder[0])
		in.endedOrder = in.endedOrder[1:]
	}
}

// endedUnder reports whether an ended actor kept is under id.
func (in *Inspector) endedUnder(id string) bool {
	prefix := id + "/"
	for _, o := range in.endedOrder {
		if strings.HasPrefix(o, prefix) {
			return true
		}
	}
	return false
}

// stoppedActor returns the actor id among the newest that stopped
// quietly.
func (in *Inspector) stoppedActor(id string) (endedActor, bool) {
	for i := range min(in.stoppedNext, stoppedRing) {
		if e := in.stopped[(in.stoppedNext-1-i)%stoppedRing]; e.info.ID == id {
			return e, true
		}
	}
	return endedActor{}, false
}

// stoppedModelUnder reports whether a model adapter whose parent is id
// is among the newest actors that stopped quietly.
func (in *Inspector) stoppedModelUnder(id string) bool {
	for i := range min(in.stoppedNext, stoppedRing) {
		if e := in.stopped[i]; e.info.Parent == id && in.models[e.info.Name] {
			return true
		}
	}
	return false
}

// dropEnded forgets the ended actor id and, with under, those under it;
// in.mu must be held.
func (in *Inspector) dropEnded(id string, under bool) {
	prefix := id + "/"
	in.endedOrder = slices.DeleteFunc(in.endedOrder, func(e string) bool {
		if e == id || under && strings.HasPrefix(e, prefix) {
			delete(in.ended, e)
			return true
		}
		return false
	})
}

// expireEnded forgets the ended actors older than KeepEnded; in.mu must
// be held.
func (in *Inspector) expireEnded(now time.Time) {
	for len(in.endedOrder) > 0 {
		e, ok := in.ended[in.endedOrder[0]]
		if ok && now.Sub(e.at) <= KeepEnded {
			return
		}
		delete(in.ended, in.endedOrder[0])
		in.endedOrder = in.endedOrder[1:]
	}
}

func failureSuffix(err error) string {
	if err == nil {
		return ""
	}
	return ": " + err.Error()
}

func (in *Inspector) supervisionEvent(ev supervisor.Event) {
	text := fmt.Sprintf("%s decided %s for %s", ev.Supervisor, ev.Directive, ev.Child)
	if ev.IntensityExceeded {
		text += " (restart intensity exceeded)"
	}
	if ev.Failures > 0 {
		text += fmt.Sprintf(", failure %d in the window", ev.Failures)
	}
	if ev.Backoff > 0 {
		text += fmt.Sprintf(", after %v", ev.Backoff)
	}
	if ev.Reason != nil {
		text += ": " + ev.Reason.Error()
	}
	in.lock()
	in.addFeed(FeedItem{Time: ev.Time, Kind: "supervision", Actor: ev.Child, Text: text, Alert: true})
	// The child may have stopped before its supervisor's decision was
	// reported (its parent stopping at the same time, as a delegation's
	// loop does once its call is answered): it stopped quietly as far as
	// its own report goes, but it crashed, and the crash is kept.
	// Or its stop may be reported after the decision: the registry
	// dropped it first, and the two are reported from two goroutines.
	// The decision waits for that stop then.
	if _, kept := in.ended[ev.Child]; !kept {
		if e, ok := in.stoppedActor(ev.Child); ok {
			e.info.LastFailure, e.info.LastFailureAt = ev.Reason, ev.Time
			in.keepWithAncestors(e)
		} else if !in.alive(ev.Child) {
			in.decided[in.decidedNext%stoppedRing] = decision{child: ev.Child, reason: ev.Reason, at: ev.Time}
			in.decidedNext++
		}
	}
	in.mu.Unlock()
	in.changed()
}

// alive reports whether id is in the runtime's registry of live actors.
func (in *Inspector) alive(id string) bool {
	_, found := slices.BinarySearchFunc(in.actors(), id, func(a actors.ActorInfo, id string) int { return strings.Compare(a.ID, id) })
	return found
}

// OnToolResult records a tool result: the call is no longer pending, and
// its tool's figures count it. Give it to tools.LoopOptions.OnToolResult
// or agent.Options.OnToolResult (calling it from a hook of your own is
// fine: it is quick and does not block).
func (in *Inspector) OnToolResult(ev tools.ToolResultEvent) {
	if ev.Result.IsErrorResult() {
		in.failedToolResult(ev)
		return
	}
	in.mu.Lock()
	var at time.Duration
	if in.timed > 0 {
		at = monoNow()
	}
	in.logged()
	in.log = append(in.log, record{f: ev.Call, x: ev.Result, stream: ev.StreamID, at: at})
	if len(in.log) >= foldAt {
		in.fold()
	}
	in.mu.Unlock()
}

// failedToolResult is OnToolResult for a call that failed: its kind is
// counted and the feed says so. Apart: the common path stays short.
//
//go:noinline
func (in *Inspector) failedToolResult(ev tools.ToolResultEvent) {
	// The kind is the result's (a remote tool's, say): any string.
	kind := clip(string(tools.KindOf(ev.Result)), in.opts.Clip)
	if kind == "" {
		kind = "error"
	}
	in.lock()
	st := in.toolResult(ev, kind, monoNow())
	st.failures++
	counted := kind
	if _, ok := st.kinds[kind]; !ok && len(st.kinds) >= maxKinds {
		counted = OtherKinds
	}
	st.kinds[counted]++
	in.addFeed(FeedItem{Time: in.clock.now(), Kind: "tool", Text: fmt.Sprintf("%s call %s on %s failed (%s)", clip(ev.Call.GetName(), in.opts.Clip),
		clip(ev.Call.GetToolCallId(), in.opts.Clip), ev.StreamID, kind), Alert: true})
	in.version.Add(1)
	in.mu.Unlock()
}

// toolResult shows the result of a call (with kind, its failure kind,
// "" for none), come at at (monoNow; 0 if not read): the call is no
// longer pending, its tool counts it and its latency when it was timed.
// It returns the tool's figures; in.mu must be held.
func (in *Inspector) toolResult(ev tools.ToolResultEvent, kind string, at time.Duration) *toolStats {
	var st *toolStats
	var dispatched time.Duration
	s := in.results.find(ev.StreamID)
	if s == nil {
		s = in.resultSession(ev.StreamID, ev.Call)
	}
	if s != nil {
		if tool, d, ok := s.removeCall(ev.Call); ok {
			st, dispatched = in.toolList[tool], d
		}
		if len(s.approvals) > 0 {
			in.answeredByResult(ev, kind)
		}
	}
	if name := ev.Call.GetName(); st == nil || !sameString(name, st.name) {
		st = in.toolStatsApart(name)
	}
	st.calls++
	in.uses++
	st.used = in.uses
	if dispatched > 0 {
		in.timed--
		if at > 0 {
			st.addLatency(at - dispatched) // precise: a latency
		}
	}
	return st
}

// answeredByResult forgets a call waiting for approval that got its
// result; in.mu must be held.
//
//go:noinline
func (in *Inspector) answeredByResult(ev tools.ToolResultEvent, kind string) {
	in.answered(ev.StreamID, ev.Call.GetToolCallId(), approvalResult(kind))
}

// toolStatsApart is toolStats, not inlined in the hot paths that seldom
// need it.
//
//go:noinline
func (in *Inspector) toolStatsApart(name string) *toolStats { return in.toolStats(name) }

// resultSession finds the session of a tool result that is not the one
// of the result before, and remembers it for the next; in.mu must be
// held. Among sessions of one id (twins, other agents'), the one
// holding the call (its frame, else its id) is the result's; a twin is
// not remembered (the next result may be its twin's).
//
//go:noinline
func (in *Inspector) resultSession(stream string, call *messages.Frame) *session {
	var byID *session
	s := in.twinOf(stream, func(s *session) bool {
		for i := range s.calls {
			if s.calls[i].call == call {
				return true
			}
			if byID == nil && s.calls[i].id() == call.GetToolCallId() {
				byID = s
			}
		}
		return false
	})
	if s != nil && s.twin && byID != nil && !s.holds(call) {
		s = byID
	}
	if s != nil && !s.twin {
		in.results.remember(stream, s)
	}
	return s
}

// OnBreakerChange records that the circuit breaker of tool moved to
// state: the feed says so and the tool's figures show it. Give it to
// tools.BreakerOptions.OnChange (agent.Options.Breaker.OnChange).
func (in *Inspector) OnBreakerChange(tool string, state tools.BreakerState) {
	now := time.Now()
	in.lock()
	st := in.toolStats(tool)
	st.breaker = state.String()
	in.addFeed(FeedItem{Time: now, Kind: "breaker", Text: fmt.Sprintf("circuit breaker of %s %s", tool, state), Alert: state == tools.BreakerOpen})
	in.mu.Unlock()
	in.changed()
}

// toolStats returns the figures of a tool, making them; in.mu must be
// held. The name is the model's (a call may name any tool, one that does
// not exist included): it is clipped to Options.Clip, and past
// maxOtherTools rows of names not given to [Inspector.Tools], the figures
// of a new such name are counted in one row, [OtherTools]. Past
// [MaxToolRows] rows, making one drops the row used least recently (see
// dropToolRow).
func (in *Inspector) toolStats(name string) *toolStats {
	name = clip(name, in.opts.Clip)
	st := in.tools[name]
	if st != nil {
		return st
	}
	other := !in.registered[name]
	if other {
		if in.unregistered >= maxOtherTools {
			name, other = OtherTools, false
			if st = in.tools[name]; st != nil {
				return st
			}
		} else {
			in.unregistered++
		}
	}
	in.uses++
	st = &toolStats{name: name, other: other, used: in.uses, kinds: map[string]int{}}
	if len(in.toolList) < MaxToolRows {
		st.index = int32(len(in.toolList))
		in.toolList = append(in.toolList, st)
	} else {
		st.index = in.dropToolRow()
		in.toolList[st.index] = st
	}
	in.tools[name] = st
	return st
}

// dropToolRow forgets the row of tool figures used least recently (its
// last result, or its making, the longest ago) and returns its index,
// for the new row; in.mu must be held. A pending call that pointed at it
// is counted, at its result, in the row of its tool's name (made
// anew); an adapter's observer that remembered it looks it up again.
//
//go:noinline
func (in *Inspector) dropToolRow() int32 {
	oldest := in.toolList[0]
	for _, st := range in.toolList[1:] {
		if st.used < oldest.used {
			oldest = st
		}
	}
	delete(in.tools, oldest.name)
	if oldest.other {
		in.unregistered--
	} else if s := in.stalls[oldest.name]; s != nil && !s.busy() {
		// A tool wrapped by Tools goes with its row, its switch too
		// unless stalled: a host giving ever new tools keeps
		// MaxToolRows of them. Its next call lists it again.
		delete(in.registered, oldest.name)
		s.dropped.Store(true)
		delete(in.stalls, oldest.name)
	}
	oldest.dropped = true
	return oldest.index
}

// OtherTools names the row of tool figures that counts the calls of
// tools past the first maxOtherTools (32) names not given to
// [Inspector.Tools]: the names of calls are the model's, which may call
// any number of tools that do not exist. It is no valid tool name.
const OtherTools = "(other tools)"

// OtherKinds names the entry of a tool's failure kinds that counts the
// failures of kinds past the first maxKinds (16) of the tool: a kind is
// a string of the result's meta, which a tool (a remote one, say) sets
// as it likes. It is no valid kind.
const OtherKinds = "(other kinds)"

// maxKinds bounds the failure kinds counted apart per tool.
const maxKinds = 16

// maxOtherTools bounds the rows of tool figures of names not given to
// Inspector.Tools.
const maxOtherTools = 32

// MaxToolRows bounds the rows of tool figures kept (the page draws them
// all, in every event): a host whose agents call more distinct tools,
// over its life, than this keeps the figures of those used most
// recently. Past it, the row of the tool used least recently (its last
// result, or the making of its row, the longest ago) is dropped, its
// figures forgotten; the tool's next call starts a row afresh. A tool
// given to [Inspector.Tools] with Options.Faults has a row from then on,
// with its stall switch, which goes with the row unless the tool is
// stalled (or calls wait at its switch); its next call lists it again.
const MaxToolRows = 128

// toolStats are the figures of one tool.
type toolStats struct {
	name  string // the tool's name
	index int32  // in in.toolList
	// other rows are of names not given to Tools, counted in
	// in.unregistered; dropped ones were dropped by dropToolRow.
	other, dropped bool
	// used is in.uses at the row's last result or its making: the row
	// used least recently goes first past MaxToolRows.
	used            uint64
	breaker         string // the breaker's state, once it changed
	calls, failures int
	kinds           map[string]int  // failures by kind (clipped): maxKinds, then OtherKinds
	lat             []time.Duration // ring of the newest latencySamples
	latNext         int
	// timedTick is the coarse clock's tick (unix ns) of the calls timed
	// last, timedInTick how many calls were timed in it.
	timedTick   int64
	timedInTick int
}

// timedPerTick is how many calls of a tool are timed per tick of the
// coarse clock (coarseResolution) at most: a tool called more often has
// its latencies sampled, as reading the system clock is what costs.
const timedPerTick = 8

// timeCall reports whether a call of the tool dispatched at now (unix
// nanoseconds from the coarse clock) is timed.
func (t *toolStats) timeCall(now int64) bool {
	if tick := now; tick != t.timedTick {
		t.timedTick, t.timedInTick = tick, 0
	}
	if t.timedInTick >= timedPerTick {
		return false
	}
	t.timedInTick++
	return true
}

func (t *toolStats) addLatency(d time.Duration) {
	if len(t.lat) < latencySamples {
		t.lat = append(t.lat, d)
		return
	}
	t.lat[t.latNext] = d
	t.latNext = (t.latNext + 1) % latencySamples
}

// percentiles returns the 50th, 90th and 99th percentiles of the samples
// (nearest rank), or zeros without samples.
func percentiles(samples []time.Duration) (p50, p90, p99 time.Duration) {
	if len(samples) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	rank := func(p int) time.Duration {
		i := (p*len(s)+99)/100 - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return rank(50), rank(90), rank(99)
}

// forget drops the oldest sessions and durability positions past
// Options.MaxSessions (first seen first), keeping those with a stream
// open or a call waiting for approval, and the session keep (one just
// made, nil for none): O(1) per session, so that a host running
// conversations without end pays the same for each. A dropped session's
// buffers are kept for the next one (in.spare). in.mu must be held.
func (in *Inspector) forget(keep *session) {
	limit := in.opts.MaxSessions
	for n := in.sessionOrder.len(); in.sessionOrder.len() > limit && n > 0; n-- {
		s := in.sessionOrder.pop()
		if s == keep || len(s.streams) > 0 || len(s.approvals) > 0 {
			in.sessionOrder.push(s) // busy: later
			continue
		}
		in.index.remove(s)
		if s.twin {
			in.index.untwin(s)
		}
		in.timed -= s.reset()
		in.spare = s
	}
	for len(in.stores) > limit && in.storeOrder.len() > 0 {
		delete(in.stores, in.storeOrder.pop())
	}
}

// agentOf returns the agent of the model adapter self (an actor's id):
// the name of the actor it runs under, its loop, which package agent
// names after the agent, escaped as in agent.SessionKey (the first
// element of the keys of the agent's sessions in its store). It is the
// loop's Spec name (its id's last element may carry a number, when
// several loops of one agent run side by side, a durable agent's one
// per session).
func (in *Inspector) agentOf(self string) string {
	i := strings.LastIndexByte(self, '/')
	if i < 0 {
		return ""
	}
	parent := self[:i]
	if parent == in.rt.Host().Id {
		return "" // an adapter of its own, in no loop
	}
	list := in.actors()
	if j, ok := slices.BinarySearchFunc(list, parent, func(a actors.ActorInfo, id string) int { return strings.Compare(a.ID, id) }); ok && list[j].Name != "" {
		return list[j].Name
	}
	return parent[strings.LastIndexByte(parent, '/')+1:]
}

// twinOf returns the session of stream's id that pick accepts, of any
// agent, or, when pick accepts none, the first found; nil when none is
// kept. in.mu must be held.
func (in *Inspector) twinOf(stream string, pick func(*session) bool) *session {
	id := sessionKey(stream)
	var first, picked *session
	in.index.twins(id, in.index.hash(id), func(s *session) bool {
		if first == nil {
			first = s
		}
		if pick(s) {
			picked = s
			return false
		}
		return true
	})
	if picked != nil {
		return picked
	}
	return first
}

// ring is a queue, first in first out, kept in a ring that grows only
// when full: a queue about as long as it was before pushes and pops
// without allocating or copying.
type ring[T any] struct {
	items   []T
	head, n int // items[head] is the first of n
}

func (r *ring[T]) len() int { return r.n }

// at returns the i-th item, first first; i must be below len.
func (r *ring[T]) at(i int) T {
	i += r.head
	if i >= len(r.items) {
		i -= len(r.items)
	}
	return r.items[i]
}

// push adds x last.
func (r *ring[T]) push(x T) {
	if r.n == len(r.items) {
		grown := make([]T, max(8, 2*len(r.items)))
		copy(grown, r.items[r.head:])
		copy(grown[len(r.items)-r.head:], r.items[:r.head])
		r.items, r.head = grown, 0
	}
	i := r.head + r.n
	if i >= len(r.items) {
		i -= len(r.items)
	}
	r.items[i] = x
	r.n++
}

// pop removes and returns the first; the ring must not be empty. Its
// slot is zeroed: what was popped (a forgotten session and its buffers)
// is not kept reachable by the ring.
func (r *ring[T]) pop() T {
	x := r.items[r.head]
	var zero T
	r.items[r.head] = zero
	if r.head++; r.head == len(r.items) {
		r.head = 0
	}
	r.n--
	return x
}

// sessionKey is the session a stream belongs to, read as the agent
// names its streams (see agent.StreamID): attempts after the first run
// on "<session>#<n>", and a '#' or '%' of the session id is written
// "%23" or "%25".
func sessionKey(stream string) string {
	// Most ids have neither: one test a byte ('#' and '%' are 0x23 and
	// 0x25; so are '!' and '\'' with bits 1 and 2 cleared, which merely
	// take the full reading).
	for i := 0; i < len(stream); i++ {
		if stream[i]&^6 == '!' {
			session, _ := agent.SessionOf(stream)
			return session
		}
	}
	return stream
}

// clip shortens s to at most n bytes (on a rune boundary), marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("… (%d bytes)", len(s))
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
