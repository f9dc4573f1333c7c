package telemetry

import (
	"context"
	"sync"
	"time"

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
	err     error
	sup     *supervisor.Event
	done    chan struct{}
}

// handler is the state of one incarnation of a tap, kept by the recorder.
type handler interface {
	handle(ev *event)
}

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

// The recorder is woken once batchSize events wait, or batchDelay after
// the first of them: not once per event, which would cost a goroutine
// wake-up on each side for every frame of interest.
const (
	batchSize  = 64
	batchDelay = time.Millisecond
)

// recorder is the queue of events and the goroutine that records them.
type recorder struct {
	t *Telemetry

	mu     sync.Mutex
	queue  []event
	closed bool
	armed  bool          // timer will wake the goroutine
	timer  *time.Timer   // fires batchDelay after the first event waits
	wake   chan struct{} // a token when the queue is to be recorded
	done   chan struct{} // closed when the goroutine has returned
}

func startRecorder(t *Telemetry) *recorder {
	r := &recorder{t: t, wake: make(chan struct{}, 1), done: make(chan struct{})}
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

// put queues a copy of ev; after Shutdown it is dropped (a flush is
// answered).
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
	r.queue = append(r.queue, *ev)
	switch {
	case len(r.queue) >= batchSize || ev.kind == evFlush:
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

func (r *recorder) loop() {
	defer close(r.done)
	var batch []event
	for {
		_, open := <-r.wake
		r.mu.Lock()
		batch, r.queue = r.queue, batch[:0]
		r.mu.Unlock()
		for i := range batch {
			r.record(&batch[i])
			batch[i] = event{}
		}
		if !open {
			return
		}
	}
}

func (r *recorder) record(ev *event) {
	switch ev.kind {
	case evFlush:
		close(ev.done)
	case evSupervision:
		r.t.recordSupervision(ev.sup)
	default:
		ev.to.handle(ev)
	}
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

// Shutdown records what is queued and stops the recorder goroutine;
// events seen afterwards are dropped. It does not shut the providers
// down (the host owns them). Shutdown is idempotent.
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
	r.mu.Unlock()
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
