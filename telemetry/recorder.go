package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// The taps do not build spans or record metrics in the actor's turn: they
// copy what they saw into an event, with its time, and queue it. One
// goroutine per Telemetry (the recorder) turns the events, in order, into
// spans (with the events' times as their start and end) and measurements.
// An actor pays a lock and an append per frame of interest; the spans are
// built beside the run instead of in its critical path.

type eventKind uint8

const (
	evIn eventKind = iota + 1
	evOut
	evFailed
	// evResumed: a supervisor's Resume answered a call of the tapped
	// duplex (stream, callID; alone when the stream's other calls go
	// on), the runtime closing it with ERROR and END that the tap does
	// not see.
	evResumed
	evSupervision
	evFlush
)

// event is what a tap saw, copied out of the frame (frames are not read
// after the actor's turn).
type event struct {
	kind   eventKind
	to     handler // the tap's state; nil for supervision and flush
	at     time.Time
	ftype  messages.FrameType
	stream string
	callID string
	name   string // frame name, tool name
	text   string // ERROR text; the failure kind of a failed TOOL_RESULT
	actor  string // id of the tapped actor
	// payload is the frame's payload (META, PARAM); payloads are not
	// changed once a frame is emitted.
	payload []byte
	isError bool
	alone   bool // evResumed: the call was answered alone on its stream
	err     error
	sup     *supervisor.Event
	done    chan struct{}
}

// handler is the state of one incarnation of a tap, kept by the recorder.
type handler interface {
	handle(ev *event)
	// idle reports whether the handler keeps no state (no span open).
	idle() bool
	// abandon ends the spans open at at, marked incomplete, without
	// metrics, and forgets all state: events were dropped.
	abandon(at time.Time)
	// abandonStream does what abandon does for the spans of one stream
	// only: events of that stream were dropped, among them events of
	// frames written into the tapped actor when in is set.
	abandonStream(stream string, in bool, at time.Time)
	// listing tells whether the handler is in Telemetry.active.
	listing() *listed
}

// listed is whether a handler is in Telemetry.active, so that the
// recorder touches the map only when the handler starts or stops
// keeping state, not for every event.
type listed struct{ in bool }

func (l *listed) listing() *listed { return l }

// frameEvent copies f into an event.
func frameEvent(kind eventKind, to handler, f *messages.Frame) event {
	ev := event{kind: kind, to: to, at: time.Now(), ftype: f.GetType(), stream: f.GetStreamId(),
		callID: f.GetToolCallId(), name: f.GetName(), payload: f.GetPayload()}
	switch ev.ftype {
	case messages.FrameType_ERROR:
		ev.text = f.GetText()
	case messages.FrameType_TOOL_RESULT:
		if ev.isError = f.IsErrorResult(); ev.isError {
			ev.text = f.GetMeta().GetFailureKind()
		}
	}
	return ev
}

// resumedEvent is the event of a call a Resume answered (see evResumed);
// err is the failure, nil when the tap did not see it (a panic).
func resumedEvent(to handler, a actors.ResumeAnswered, err error) *event {
	return &event{kind: evResumed, to: to, at: time.Now(), stream: a.Stream, callID: a.ToolCallID, alone: a.Alone, err: err}
}

// errResumed is the failure of a call a Resume answered when the tap did
// not see it: the duplex's Logic panicked on one of its frames.
var errResumed = errors.New("the call failed its duplex, which its supervisor resumed")

// failureText is the status of a span that err failed (errResumed for
// nil), clipped.
func failureText(err error) string {
	if err == nil {
		err = errResumed
	}
	return clipText(err.Error())
}

// The recorder is woken once batchSize events wait, or batchDelay after
// the first of them: not once per event, which would cost a goroutine
// wake-up on each side for every frame of interest.
const (
	batchSize  = 64
	batchDelay = time.Millisecond
)

// DefaultMaxQueued is the default of [Options.MaxQueued]: about 3 MB of
// events (besides the payloads they share with their frames).
const DefaultMaxQueued = 1 << 14

// recorder is the queue of events and the goroutine that records them.
//
// The queue holds at most max events. An event that finds it full is
// dropped and counted: the actor's turn never waits for the recorder. The
// drops since the recorder last took the queue are a burst; nothing is
// queued behind them (the queue stays full until the recorder takes it),
// so the recorder meets the burst right after the events it took: it
// then ends the spans still open that may have lost events (their ends
// may be among them), marked incomplete, and forgets the state it kept
// for them. Which spans those are, the burst remembers as it drops: the
// streams of the taps whose frames were dropped (a stream's spans in
// other taps go on: their own events are all there), every stream of a
// tap whose failure was dropped, and every span open when a supervision
// decision (which belongs to no stream) was dropped or when more than
// maxLost streams lost events.
type recorder struct {
	t   *Telemetry
	max int

	mu      sync.Mutex
	queue   []event
	waiters []chan struct{} // flushes that found the queue full
	closed  bool
	armed   bool          // timer will wake the goroutine
	timer   *time.Timer   // fires batchDelay after the first event waits
	wake    chan struct{} // a token when the queue is to be recorded
	done    chan struct{} // closed when the goroutine has returned
	// The burst of drops since the recorder last took the queue:
	lost      int       // events dropped in it
	lostSince time.Time // when the first of them was dropped
	lostKeys  [maxLost]lostKey
	nLostKeys int           // of lostKeys in use
	lostAll   bool          // a lost event's stream is unknown, or lostKeys overflowed
	warning   chan struct{} // closed when the burst's warning is logged; nil when none was started

	dropped atomic.Uint64 // events dropped since the start
	panics  atomic.Uint64 // panics of the host's processors or meter contained (see contain)
	// gaveUp is set when a Shutdown's context ended before the goroutine
	// returned: it then records nothing more.
	gaveUp atomic.Bool
}

// lostKey names what a dropped event belonged to: one stream of a tap,
// or with all every stream of the tap (its failure was dropped). in is
// set when an event of a frame written into the tapped actor was among
// those dropped (a request may have been lost, not only an answer).
type lostKey struct {
	to     handler
	stream string
	all    bool
	in     bool
}

// A burst remembers up to maxLost streams that lost events; beyond them,
// every open span is abandoned. It is kept in the recorder, so that
// dropping allocates nothing.
const maxLost = 16

func startRecorder(t *Telemetry, max int) *recorder {
	r := &recorder{t: t, max: max, wake: make(chan struct{}, 1), done: make(chan struct{})}
	r.timer = time.AfterFunc(time.Hour, r.timeout)
	r.timer.Stop()
	go r.loop()
	return r
}

// timeout wakes the goroutine for events that waited batchDelay.
func (r *recorder) timeout() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.armed = false
	if !r.closed {
		r.signal()
	}
}

// signal wakes the goroutine; r.mu is held (Shutdown closes wake under it).
func (r *recorder) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// put queues a copy of ev, or drops it when the queue is full; after
// Shutdown it is dropped (a flush is answered). A flush is never dropped.
func (r *recorder) put(ev *event) {
	if r == nil {
		return
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		if ev.done != nil {
			close(ev.done)
		}
		return
	}
	if len(r.queue) >= r.max {
		if ev.kind == evFlush {
			// Answered once what is queued (all of it seen before) is recorded.
			r.waiters = append(r.waiters, ev.done)
		} else {
			r.drop(ev)
		}
		r.mu.Unlock()
		return
	}
	if len(r.queue) == cap(r.queue) { // grow, but never beyond max
		q := make([]event, len(r.queue), min(max(2*cap(r.queue), batchSize), r.max))
		copy(q, r.queue)
		r.queue = q
	}
	r.queue = append(r.queue, *ev)
	switch {
	case len(r.queue) >= batchSize || len(r.queue) >= r.max || ev.kind == evFlush:
		if r.armed {
			r.armed = false
			r.timer.Stop()
		}
		r.signal()
	case !r.armed:
		r.armed = true
		r.timer.Reset(batchDelay)
	}
	r.mu.Unlock()
}

// drop counts an event that found the queue full and remembers whose
// it was; r.mu is held. The first drop of a burst has a warning logged,
// off the actor's turn.
func (r *recorder) drop(ev *event) {
	r.dropped.Add(1)
	r.lose(ev)
	if r.lost++; r.lost > 1 {
		return
	}
	r.lostSince = time.Now()
	if r.warning != nil {
		select {
		case <-r.warning:
		default:
			return // the last burst's warning is still being logged
		}
	}
	warned := make(chan struct{})
	r.warning = warned
	total := r.dropped.Load()
	go func() {
		defer close(warned)
		r.t.logger.Warn("telemetry: event queue full, dropping events until the recorder catches up; "+
			"the spans then open of the streams that lose events end marked "+string(incompleteKey)+"; the span processor or exporter is slower than the run",
			slog.Int("max_queued", r.max), slog.Uint64("dropped_total", total))
	}()
}

// lose adds the stream ev belonged to to the burst's; r.mu is held.
func (r *recorder) lose(ev *event) {
	if r.lostAll {
		return
	}
	if ev.to == nil { // a supervision decision: of no stream
		r.lostAll = true
		return
	}
	all, in := ev.kind == evFailed, ev.kind == evIn
	for i := range r.lostKeys[:r.nLostKeys] {
		if l := &r.lostKeys[i]; l.to == ev.to && l.stream == ev.stream && l.all == all {
			l.in = l.in || in
			return
		}
	}
	if r.nLostKeys == maxLost {
		r.lostAll = true
		return
	}
	r.lostKeys[r.nLostKeys] = lostKey{to: ev.to, stream: ev.stream, all: all, in: in}
	r.nLostKeys++
}

func (r *recorder) loop() {
	defer close(r.done)
	var batch []event
	var waiters []chan struct{}
	var lostKeys [maxLost]lostKey
	for {
		_, open := <-r.wake
		r.mu.Lock()
		batch, r.queue = r.queue, batch[:0]
		waiters, r.waiters = r.waiters, waiters[:0]
		lost, since, all := r.lost, r.lostSince, r.lostAll
		lostKeys, r.lostKeys = r.lostKeys, lostKeys
		nLost := r.nLostKeys
		r.lost, r.nLostKeys, r.lostAll = 0, 0, false
		r.mu.Unlock()
		for i := range batch {
			if !r.gaveUp.Load() {
				r.record(&batch[i])
			} else if batch[i].kind == evFlush {
				close(batch[i].done)
			}
			batch[i] = event{}
		}
		switch { // the burst came right after the batch
		case r.gaveUp.Load():
		case all:
			r.abandonAll(since)
		case lost > 0:
			r.abandon(lostKeys[:nLost], since)
		}
		clear(lostKeys[:]) // keep no handler alive
		for i, w := range waiters {
			close(w)
			waiters[i] = nil
		}
		if !open {
			// Shutdown: the spans still open would never be ended (nor
			// exported); they end now, as spans that lost their ends do.
			if !r.gaveUp.Load() {
				r.abandonAll(time.Now())
			}
			return
		}
	}
}

func (r *recorder) record(ev *event) {
	defer r.contain()
	switch ev.kind {
	case evFlush:
		close(ev.done)
	case evSupervision:
		r.t.recordSupervision(ev.sup)
	default:
		defer r.t.relist(ev.to) // also after a panic: the handler's spans may have changed
		ev.to.handle(ev)
	}
}

// contain recovers a panic of the host's span processors, exporters or
// meter, which run on the recorder's goroutine (where nothing else would
// recover it, and the host would die): what was being recorded is lost,
// the recorder goes on. The panics are logged, the first and then each
// time their count doubles. Deferred by what calls into them: each span's
// start and end and each measurement (startSpan, endSpan, measure), so
// that the taps' state goes on as if the call had returned (a request
// ended is forgotten, a run ended is no longer open), and around each
// event as a last resort.
func (r *recorder) contain() {
	p := recover()
	if p == nil {
		return
	}
	if n := r.panics.Add(1); n&(n-1) == 0 {
		r.t.logger.Error("telemetry: a span processor, exporter or meter panicked; what it was recording is lost",
			slog.Any("panic", p), slog.Uint64("panics_total", n))
	}
}

// givenUp reports whether Shutdown gave up: the recorder then calls
// the processors and the meter no more, also within an event or an
// abandonment under way (which may end many spans).
func (r *recorder) givenUp() bool { return r != nil && r.gaveUp.Load() }

// abandon and abandonAll do what Telemetry's do, containing a panic
// (see contain).
func (r *recorder) abandon(lost []lostKey, since time.Time) {
	defer r.contain()
	r.t.abandon(lost, since)
}

func (r *recorder) abandonAll(since time.Time) {
	defer r.contain()
	r.t.abandonAll(since)
}

// relist puts h into t.active, or takes it out, when it started or
// stopped keeping state.
func (t *Telemetry) relist(h handler) {
	if l, idle := h.listing(), h.idle(); idle == l.in {
		if idle {
			delete(t.active, h)
		} else {
			t.active[h] = struct{}{}
		}
		l.in = !idle
	}
}

// abandon ends the spans of the streams that lost events, marked
// incomplete, at since, and forgets their state.
func (t *Telemetry) abandon(lost []lostKey, since time.Time) {
	for _, k := range lost {
		if k.all {
			k.to.abandon(since)
		} else {
			k.to.abandonStream(k.stream, k.in, since)
		}
		t.relist(k.to)
	}
}

// abandonAll ends the spans every tap has open, marked incomplete, at
// since (when events began to be dropped), and forgets their state: any
// of them may have lost its end (the burst does not know whose events
// it dropped).
func (t *Telemetry) abandonAll(since time.Time) {
	for h := range t.active {
		if t.rec.gaveUp.Load() {
			return // Shutdown gave up: nothing more goes to the processors
		}
		delete(t.active, h) // first: a panic in a processor leaves the rest listed
		h.listing().in = false
		h.abandon(since)
	}
}

// Dropped returns how many events were dropped because the queue was full
// (see [Options.MaxQueued]) since t was made. It is safe to call at any
// time.
func (t *Telemetry) Dropped() uint64 {
	if t.rec == nil {
		return 0
	}
	return t.rec.dropped.Load()
}

// Flush returns once every event seen before the call is recorded (spans
// ended by then are handed to the tracer provider's span processors), or
// with ctx's error. Tests call it before reading an exporter.
func (t *Telemetry) Flush(ctx context.Context) error {
	if t.rec == nil {
		return nil
	}
	done := make(chan struct{})
	t.rec.put(&event{kind: evFlush, done: done})
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown records what is queued, ends the spans still open (runs,
// tool calls and model requests whose ends have not been seen), marked
// polyweave.telemetry.incomplete, and stops the recorder goroutine;
// events seen afterwards are dropped (and not counted by
// [Telemetry.Dropped]). Stop the agents first (close the runtime) for
// their runs to end as they do.
// The metric polyweave.telemetry.dropped is no longer reported. It does not
// shut the providers down (the host owns them). Shutdown is idempotent.
//
// If ctx ends first (a span processor or exporter blocks, or is too
// slow), Shutdown returns ctx's error and the recorder gives up: what is
// still queued is discarded, spans still open are neither ended nor
// handed to the processors, and the goroutine returns as soon as the
// processor or meter call it is in returns. A call that never returns
// keeps the goroutine blocked in it: nothing can stop a goroutine from
// outside.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t.rec == nil {
		return nil
	}
	r := t.rec
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		r.timer.Stop()
		close(r.wake) // the loop drains the queue, then returns
	}
	warning := r.warning
	r.mu.Unlock()
	var err error
	if t.unregister != nil {
		err = t.unregister()
	}
	for _, done := range []chan struct{}{r.done, warning} {
		if done == nil {
			continue
		}
		select {
		case <-done:
		case <-ctx.Done():
			select {
			case <-done: // done as well: Shutdown did not give up
				continue
			default:
			}
			if done == r.done {
				r.gaveUp.Store(true)
			}
			return ctx.Err()
		}
	}
	if err != nil {
		return fmt.Errorf("telemetry: unregistering the %s callback: %w", MetricDropped, err)
	}
	return nil
}
