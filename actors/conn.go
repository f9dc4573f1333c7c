package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/messages"
)

// ErrDuplexStopped is returned by [Conn.Recv] once the duplex has stopped
// (closed, or stopped by its supervisor) and every frame it emitted before
// has been read.
var ErrDuplexStopped = errors.New("actors: duplex stopped")

// Conn connects plain Go code to a duplex started with [Runtime.Start]:
// Send writes into its sink, Recv reads what its source emits. A Conn is
// safe for concurrent use; frames are received in the order the duplex
// emitted them.
type Conn struct {
	rt      *Runtime
	pid     *actor.PID
	port    *port
	portPID *actor.PID
	stop    sync.Once
}

// Start spawns spec under the runtime's top-level supervisor and connects
// it to a new Conn. spec.Subscriber is ignored: the Conn is the subscriber.
func (rt *Runtime) Start(spec Spec) (*Conn, error) {
	p := &port{notify: make(chan struct{}, 1), registry: rt.system.ProcessRegistry, gone: make(chan struct{})}
	portPID, ok := rt.system.ProcessRegistry.Add(p, "conn"+rt.system.ProcessRegistry.NextId())
	if !ok {
		return nil, errors.New("actors: register conn: id taken")
	}
	p.mu.Lock()
	p.self = portPID
	p.mu.Unlock()
	spec.Subscriber = Ref{}
	// The port watches the duplex, so that Recv learns when it is gone.
	pid, err := rt.spawn(spec, portPID, true)
	if err != nil {
		rt.system.ProcessRegistry.Remove(portPID)
		return nil, err
	}
	return &Conn{rt: rt, pid: pid, port: p, portPID: portPID}, nil
}

// Spawn starts spec under the runtime's top-level supervisor with
// spec.Subscriber as its subscriber (the zero Ref discards what it emits)
// and returns it. Use it to feed a duplex into an actor of your own; use
// [Runtime.Start] to talk to it from plain Go code.
func (rt *Runtime) Spawn(spec Spec) (Ref, error) {
	pid, err := rt.spawn(spec, spec.Subscriber.pid, false)
	if err != nil {
		return Ref{}, err
	}
	return Ref{pid: pid}, nil
}

// Send writes f into the sink of the duplex to, from outside any actor.
func (rt *Runtime) Send(to Ref, f *messages.Frame) {
	if to.pid != nil {
		rt.system.Root.Send(to.pid, f)
	}
}

// Ref is the connected duplex.
func (c *Conn) Ref() Ref { return Ref{pid: c.pid} }

// Send writes f into the duplex's sink. It never blocks; it returns
// ErrDuplexStopped once the duplex is known to have stopped.
func (c *Conn) Send(f *messages.Frame) error {
	if c.port.isStopped() {
		return ErrDuplexStopped
	}
	c.rt.system.Root.Send(c.pid, f)
	return nil
}

// SendAll writes frames in order.
func (c *Conn) SendAll(frames ...*messages.Frame) error {
	for _, f := range frames {
		if err := c.Send(f); err != nil {
			return err
		}
	}
	return nil
}

// Recv returns the next frame the duplex emitted. It blocks until there is
// one, the duplex has stopped (ErrDuplexStopped), or ctx ends (ctx.Err()).
func (c *Conn) Recv(ctx context.Context) (*messages.Frame, error) {
	return c.port.recv(ctx)
}

// RecvStream reads frames until the END of streamID and returns them, END
// included. Frames of other streams read meanwhile are kept for later
// Recv calls. It returns what it read so far with an error when the duplex
// stops or ctx ends first.
func (c *Conn) RecvStream(ctx context.Context, streamID string) ([]*messages.Frame, error) {
	// Room for a short stream at once: growing from nil would allocate
	// four or five times for a dozen frames.
	got := make([]*messages.Frame, 0, recvStreamRoom)
	var others []*messages.Frame
	defer func() { c.port.unread(others) }()
	for {
		f, err := c.port.recv(ctx)
		if err != nil {
			return got, fmt.Errorf("read stream %q: %w", streamID, err)
		}
		if f.GetStreamId() != streamID {
			others = append(others, f)
			continue
		}
		got = append(got, f)
		if f.GetType() == messages.FrameType_END {
			return got, nil
		}
	}
}

// recvStreamRoom is the room RecvStream makes for a stream's frames
// before it has read any: a tool conversation's run is about a dozen.
const recvStreamRoom = 16

// Close stops the duplex and its subtree and waits until it is gone or ctx
// ends, however long its stop takes. Frames it emitted before stopping
// can still be read with Recv. A Close after one whose ctx ended, or
// beside one still waiting, stops nothing more and waits in the same
// way: it returns nil once the duplex is gone.
func (c *Conn) Close(ctx context.Context) error {
	if err := awaitGone(ctx, c.port.gone, func() {
		c.stop.Do(func() { c.rt.system.Root.Stop(c.pid) })
	}); err != nil {
		return fmt.Errorf("actors: close conn: %w", err)
	}
	return nil
}

// port is the protoactor process behind a Conn: it queues what the duplex
// emits for Recv, with no actor (and no goroutine) of its own.
type port struct {
	mu    sync.Mutex
	queue []*messages.Frame
	head  int
	// stopped is written under mu and read without it by Send, which
	// only needs to know whether the duplex is gone.
	stopped atomic.Bool
	// closed is set under mu by MuxStream.Close: the port takes no more
	// frames and Recv waits no more, so that the Mux can give notify to
	// a stream opened later once no reader waits on it (readers == 0).
	closed  bool
	readers int
	notify  chan struct{}
	// wake, when set, says which frames wake a reader waiting in recv;
	// the others are queued without waking it (see Mux.OpenWake). It is
	// written and called with mu held.
	wake func(*messages.Frame) bool
	// route is the stream id a Mux routes to the port while routed (Conn
	// ports: never). Both are written with the Mux's lock and mu held, and
	// read with either: a frame is handed over (deliver) only under mu to
	// a port routed under the frame's id, so that a stream released and
	// opened again under another id never gets a frame of the one it was.
	route  string
	routed bool

	registry *actor.ProcessRegistryValue
	self     *actor.PID
	// gone, a Conn's port's (nil for a Mux stream's), is closed when the
	// duplex has stopped (its Terminated came), with stopped set.
	gone chan struct{}
}

var _ actor.Process = (*port)(nil)

func (p *port) SendUserMessage(_ *actor.PID, message any) {
	if env, ok := message.(*actor.MessageEnvelope); ok {
		message = env.Message
	}
	f, ok := message.(*messages.Frame)
	if !ok {
		return
	}
	p.mu.Lock()
	p.put(f)
	p.mu.Unlock()
}

// deliver queues f, a frame of stream id, if the port is routed under id
// (see route), and reports whether it was.
func (p *port) deliver(id string, f *messages.Frame) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.routed || p.route != id {
		return false
	}
	p.put(f)
	return true
}

// put queues f and wakes a waiting reader if wake accepts f. Call it
// with mu held.
func (p *port) put(f *messages.Frame) {
	if p.closed {
		// A late frame for a closed stream: dropped, and notify, which
		// may serve another stream now, is not touched.
		return
	}
	p.queue = append(p.queue, f)
	if p.wake == nil || p.wake(f) {
		// Under mu, as closed was read: once Close has taken mu, no
		// signal of this stream can reach notify, which the Mux may
		// then give to the next stream it opens.
		p.signal()
	}
}

func (p *port) SendSystemMessage(_ *actor.PID, message any) {
	if _, ok := message.(*actor.Terminated); ok {
		p.mu.Lock()
		if p.gone != nil && !p.stopped.Load() {
			close(p.gone)
		}
		p.stopped.Store(true)
		self := p.self
		p.mu.Unlock()
		if self != nil {
			p.registry.Remove(self) // nothing more can arrive
		}
		p.signal()
	}
}

func (p *port) Stop(*actor.PID) {}

func (p *port) signal() {
	select {
	case p.notify <- struct{}{}:
	default:
	}
}

// passOn wakes another waiting reader, if there is one: notify holds one
// signal, so when several readers wait, the one a signal woke hands it on
// when it leaves frames behind or finds the port closed or stopped, which
// ends every reader's wait, not only the first's. Called with mu held.
func (p *port) passOn() {
	if p.readers > 0 {
		p.signal()
	}
}

func (p *port) isStopped() bool { return p.stopped.Load() }

func (p *port) recv(ctx context.Context) (*messages.Frame, error) {
	var one [1]*messages.Frame
	got, err := p.recvInto(ctx, one[:0], false)
	if err != nil {
		return nil, err
	}
	return got[0], nil
}

// recvInto waits as recv does for the next frame and appends it to dst,
// with all every frame queued behind it too, under one lock. With an
// error it returns dst unchanged.
func (p *port) recvInto(ctx context.Context, dst []*messages.Frame, all bool) ([]*messages.Frame, error) {
	waiting := false
	for {
		p.mu.Lock()
		if waiting {
			p.readers--
			waiting = false
		}
		if p.head < len(p.queue) {
			if all {
				rest := p.queue[p.head:]
				dst = append(dst, rest...)
				clear(rest)
				p.queue, p.head = p.queue[:0], 0
			} else {
				dst = append(dst, p.queue[p.head])
				p.queue[p.head] = nil
				p.head++
				if p.head == len(p.queue) {
					p.queue, p.head = p.queue[:0], 0
				} else {
					p.passOn() // frames are left: another reader may take them
				}
			}
			p.mu.Unlock()
			return dst, nil
		}
		switch {
		case p.closed:
			p.passOn()
			p.mu.Unlock()
			return dst, ErrStreamClosed
		case p.stopped.Load():
			p.passOn()
			p.mu.Unlock()
			return dst, ErrDuplexStopped
		}
		p.readers++
		waiting = true
		p.mu.Unlock()
		select {
		case <-p.notify:
		case <-ctx.Done():
			p.mu.Lock()
			p.readers--
			p.mu.Unlock()
			return dst, ctx.Err()
		}
	}
}

// unread puts frames back at the front of the queue, in order.
func (p *port) unread(frames []*messages.Frame) {
	if len(frames) == 0 {
		return
	}
	p.mu.Lock()
	rest := p.queue[p.head:]
	q := make([]*messages.Frame, 0, len(frames)+len(rest))
	q = append(append(q, frames...), rest...)
	p.queue, p.head = q, 0
	p.mu.Unlock()
	p.signal()
}
