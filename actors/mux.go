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

// ErrStreamOpen is returned by [Mux.Open] for a stream id that is open.
var ErrStreamOpen = errors.New("actors: stream already open")

// ErrStreamClosed is returned by [MuxStream.Recv] once the stream was
// closed and every frame queued before was read.
var ErrStreamClosed = errors.New("actors: stream closed")

// Mux connects plain Go code to a duplex, like a [Conn], for many
// conversations at once: what the duplex emits is routed by stream id to
// the [MuxStream] opened for it, so each caller reads its own frames
// without a goroutine of the Mux's own. Frames of streams not open are
// dropped. A Mux is safe for concurrent use.
type Mux struct {
	rt       *Runtime
	pid      *actor.PID
	in       *muxProcess
	pp       *actor.PID
	stopOnce sync.Once
}

// StartMux spawns spec under the runtime's top-level supervisor and
// connects it to a new Mux. spec.Subscriber is ignored.
func (rt *Runtime) StartMux(spec Spec) (*Mux, error) {
	return rt.startMux(rt.host, rt.hostGone, spec)
}

func (rt *Runtime) startMux(parent *actor.PID, gone <-chan struct{}, spec Spec) (*Mux, error) {
	in := &muxProcess{streams: map[string]*port{}, registry: rt.system.ProcessRegistry, gone: make(chan struct{})}
	pp, ok := rt.system.ProcessRegistry.Add(in, "mux"+rt.system.ProcessRegistry.NextId())
	if !ok {
		return nil, errors.New("actors: register mux: id taken")
	}
	in.self = pp
	spec.Subscriber = Ref{}
	// The Mux watches the duplex, so that its streams learn when it is
	// gone.
	pid, err := rt.spawnUnder(parent, gone, spec, pp, true)
	if err != nil {
		rt.system.ProcessRegistry.Remove(pp)
		return nil, err
	}
	return &Mux{rt: rt, pid: pid, in: in, pp: pp}, nil
}

// Ref is the connected duplex.
func (m *Mux) Ref() Ref { return Ref{pid: m.pid} }

// Stopped reports whether the duplex is known to have stopped.
func (m *Mux) Stopped() bool {
	m.in.mu.Lock()
	defer m.in.mu.Unlock()
	return m.in.stopped
}

// Open starts routing the frames of streamID to the returned stream. It
// returns an error wrapping [ErrStreamOpen] when the id is open already,
// and [ErrDuplexStopped] once the duplex has stopped.
func (m *Mux) Open(streamID string) (*MuxStream, error) {
	return m.OpenWake(streamID, nil)
}

// OpenWake is [Mux.Open] for a reader that needs only some frames as they
// come: a Recv waiting for a frame is woken by the frames wake accepts
// (and when the duplex stops), and finds the frames before them queued.
// With wake accepting only END, a caller that wants a stream's frames
// once it has ended sleeps through the stream instead of waking for
// every frame. wake runs on the duplex's goroutine with the stream's lock
// held (and at times the Mux's): it must be quick, must not block and
// must not call the Mux or its streams. A nil wake accepts every frame
// (Open).
func (m *Mux) OpenWake(streamID string, wake func(*messages.Frame) bool) (*MuxStream, error) {
	in := m.in
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.stopped {
		return nil, ErrDuplexStopped
	}
	if in.lookup(streamID) != nil {
		return nil, fmt.Errorf("%w: %q", ErrStreamOpen, streamID)
	}
	s := in.takeStream()
	if s == nil {
		s = &MuxStream{m: m, port: port{notify: in.takeNotify()}}
		s.p = &s.port
	}
	s.id, s.released = streamID, false
	p := s.p
	// Under p's lock too: a frame looked up for the stream s was (see
	// muxProcess.one) may be about to reach p.
	p.mu.Lock()
	p.wake, p.route, p.routed = wake, streamID, true
	// Room for a conversation's frames in the stream itself: the queue
	// is drained as it is read, so it rarely grows past this.
	p.queue = s.room[:0]
	p.mu.Unlock()
	if in.one.Load() == nil {
		in.one.Store(p)
	} else {
		in.streams[streamID] = p
		in.mapped.Store(int32(len(in.streams)))
	}
	return s, nil
}

// Close stops the duplex and its subtree and waits until it is gone or
// ctx ends, however long its stop takes (its Logic's OnFailure, its
// children's). A Close after one whose ctx ended, or beside one still
// waiting, stops nothing more and waits in the same way: it returns nil
// once the duplex is gone.
func (m *Mux) Close(ctx context.Context) error {
	if err := awaitGone(ctx, m.in.gone, func() {
		m.stopOnce.Do(func() { m.rt.system.Root.Stop(m.pid) })
	}); err != nil {
		return fmt.Errorf("actors: close mux: %w", err)
	}
	return nil
}

// awaitGone calls stop, unless gone is closed already, and waits until
// gone is closed (nil) or ctx ends (its error). gone is closed by the
// watcher of a duplex (a Conn's port, a Mux) when protoactor's
// Terminated comes: once the duplex and its children have stopped. It
// has no timeout of its own (protoactor's StopFuture gives up after 10
// s, however long ctx is, and answers at once for an actor already
// stopping).
func awaitGone(ctx context.Context, gone <-chan struct{}, stop func()) error {
	if isClosed(gone) {
		return nil
	}
	stop()
	select {
	case <-gone:
		return nil
	case <-ctx.Done():
		if isClosed(gone) { // gone as ctx ended
			return nil
		}
		return ctx.Err()
	}
}

// MuxStream is one stream of a [Mux]: Send writes frames into the
// duplex's sink, Recv reads the frames it emitted with this stream id.
// Close stops the routing; it does not touch the duplex.
type MuxStream struct {
	m  *Mux
	id string
	// released: s is in the Mux's free list (read and written with the
	// Mux's mu held).
	released bool
	p        *port // &port
	port     port  // allocated with the stream
	room     [muxStreamRoom]*messages.Frame
}

// muxStreamRoom is how many frames a stream queues before its queue
// grows: a tool conversation's run is about a dozen.
const muxStreamRoom = 16

// ID is the stream id.
func (s *MuxStream) ID() string { return s.id }

// Send writes f into the duplex's sink; it never blocks and returns
// ErrDuplexStopped once the duplex is known to have stopped.
func (s *MuxStream) Send(f *messages.Frame) error {
	if s.p.isStopped() {
		return ErrDuplexStopped
	}
	s.m.rt.system.Root.Send(s.m.pid, f)
	return nil
}

// SendAll writes frames in order.
func (s *MuxStream) SendAll(frames ...*messages.Frame) error {
	for _, f := range frames {
		if err := s.Send(f); err != nil {
			return err
		}
	}
	return nil
}

// Recv returns the stream's next frame. It blocks until there is one, the
// duplex has stopped and every frame before was read (ErrDuplexStopped),
// the stream was closed and every frame queued before was read
// (ErrStreamClosed), or ctx ends (ctx.Err()).
func (s *MuxStream) Recv(ctx context.Context) (*messages.Frame, error) { return s.p.recv(ctx) }

// RecvAll is Recv for a reader that takes frames in batches: it waits as
// Recv does for the next frame and returns it with every frame queued
// behind it, appended to dst, under one lock instead of one per frame.
// With an error it returns dst unchanged.
func (s *MuxStream) RecvAll(ctx context.Context, dst []*messages.Frame) ([]*messages.Frame, error) {
	return s.p.recvInto(ctx, dst, true)
}

// Close stops routing the stream's frames; later ones are dropped, and
// the id can be opened again. A Recv waiting for a frame returns
// ErrStreamClosed.
func (s *MuxStream) Close() {
	in := s.m.in
	in.mu.Lock()
	defer in.mu.Unlock()
	if s.released { // used after Release: s may be another stream's now
		return
	}
	in.unroute(s)
	s.close()
}

// Release is Close for a caller that is done with s: the Mux may give s
// to a stream opened later, so that a stream opened and released for
// every conversation allocates nothing. s must not be used after Release
// (not even its ID), and must have been used by one goroutine at a time:
// when a Recv still waits on it, or it was closed before, Release is
// Close and s is not reused. Frames of s queued and not read are dropped.
func (s *MuxStream) Release() {
	in := s.m.in
	in.mu.Lock()
	defer in.mu.Unlock()
	if s.released {
		return
	}
	in.unroute(s)
	p := s.p
	p.mu.Lock()
	// Frames are handed to p under its lock to its route (see
	// port.deliver): none can come once the route is gone.
	p.routed = false
	reusable := !p.closed && p.readers == 0 && !in.stopped && len(in.freeStreams) < maxFreeNotify
	if reusable {
		// A frame read leaves its slot nil: the queue's slots hold those
		// not read. A queue that outgrew the room left the room's slots
		// pointing at its first frames: a stream in the free list keeps
		// none.
		clear(p.queue)
		if q := p.queue[:cap(p.queue)]; len(q) == 0 || &q[0] != &s.room[0] {
			clear(s.room[:])
		}
		p.queue, p.head = nil, 0
		p.wake = nil
		select { // a signal no Recv took (END, when no reader waited)
		case <-p.notify:
		default:
		}
	}
	p.mu.Unlock()
	if !reusable {
		s.close()
		return
	}
	s.id, s.released = "", true
	in.freeStreams = append(in.freeStreams, s)
}

// close closes the port of s, unrouted already. Call it with s.m.in.mu
// held.
func (s *MuxStream) close() {
	in := s.m.in
	p := s.p
	p.mu.Lock()
	p.routed = false
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	idle := p.readers == 0
	p.mu.Unlock()
	if !idle {
		// A reader waits on notify: wake it to see the stream closed,
		// and leave notify to it.
		p.signal()
		return
	}
	// No reader waits on notify, and none will (the port is closed): a
	// stream opened later can have it. No frame can signal it any more:
	// a frame signals under mu, after reading closed.
	in.putNotify(p.notify)
}

// muxProcess is the protoactor process behind a Mux: it hands each frame
// to the port of its stream, with no actor and no goroutine of its own.
type muxProcess struct {
	mu sync.Mutex
	// one is an open stream routed without the map (or nil): the first
	// opened while none was, so that a Mux serving one stream at a time
	// (an agent running one session) hands its frames over under the
	// stream's lock alone and opens and releases streams without touching
	// the map. It is written with mu held and read without it.
	one atomic.Pointer[port]
	// streams are the other open streams; mapped is their number, read
	// without mu: frames go the way of one only while there are none.
	streams map[string]*port
	mapped  atomic.Int32
	// last is the open stream that got the last frame, a look-up saved
	// when a stream's frames come one after another.
	last   *port
	lastID string
	// free holds the notify channels of closed streams that no reader
	// waits on, for streams opened later; freeStreams the streams
	// released (MuxStream.Release), with their channels.
	free        []chan struct{}
	freeStreams []*MuxStream
	stopped     bool
	// gone is closed when the duplex has stopped (its Terminated came),
	// with stopped set.
	gone     chan struct{}
	registry *actor.ProcessRegistryValue
	self     *actor.PID
}

var _ actor.Process = (*muxProcess)(nil)

func (m *muxProcess) SendUserMessage(_ *actor.PID, message any) {
	if env, ok := message.(*actor.MessageEnvelope); ok {
		message = env.Message
	}
	f, ok := message.(*messages.Frame)
	if !ok {
		return
	}
	id := f.GetStreamId()
	// p takes the frame only while routed under its id (port.deliver): a
	// stream released meanwhile, and opened again under another id, does
	// not get the frame of the stream it was (see MuxStream.Release).
	if m.mapped.Load() == 0 {
		if p := m.one.Load(); p != nil && p.deliver(id, f) {
			return
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.last
	if p == nil || m.lastID != id {
		if p = m.lookup(id); p != nil {
			m.last, m.lastID = p, id
		}
	}
	if p != nil {
		p.deliver(id, f)
	}
}

// lookup returns the port open under id, or nil. Call it with mu held.
func (m *muxProcess) lookup(id string) *port {
	if p := m.one.Load(); p != nil && p.route == id {
		return p
	}
	return m.streams[id]
}

func (m *muxProcess) SendSystemMessage(_ *actor.PID, message any) {
	if _, ok := message.(*actor.Terminated); !ok {
		return
	}
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return
	}
	m.stopped = true
	close(m.gone)
	// A copy: MuxStream.Close deletes from the map meanwhile.
	streams := make([]*port, 0, len(m.streams)+1)
	for _, p := range m.streams {
		streams = append(streams, p)
	}
	if p := m.one.Load(); p != nil {
		streams = append(streams, p)
	}
	m.mu.Unlock()
	m.registry.Remove(m.self)
	for _, p := range streams {
		p.mu.Lock()
		p.stopped.Store(true)
		p.mu.Unlock()
		p.signal()
	}
}

func (m *muxProcess) Stop(*actor.PID) {}

// maxFreeNotify bounds the channels a Mux keeps for streams to come.
const maxFreeNotify = 64

// unroute stops routing frames to s. Call it with mu held.
func (m *muxProcess) unroute(s *MuxStream) {
	if m.one.Load() == s.p {
		m.one.Store(nil)
	} else if m.streams[s.id] == s.p {
		delete(m.streams, s.id)
		m.mapped.Store(int32(len(m.streams)))
	}
	if m.last == s.p {
		m.last, m.lastID = nil, ""
	}
}

// takeStream returns a released stream for a new one, or nil. Call it
// with mu held.
func (m *muxProcess) takeStream() *MuxStream {
	n := len(m.freeStreams)
	if n == 0 {
		return nil
	}
	s := m.freeStreams[n-1]
	m.freeStreams[n-1] = nil
	m.freeStreams = m.freeStreams[:n-1]
	return s
}

// takeNotify returns a notify channel for a new stream, one of a closed
// stream's when there is one. Call it with mu held.
func (m *muxProcess) takeNotify() chan struct{} {
	if n := len(m.free); n > 0 {
		c := m.free[n-1]
		m.free[n-1] = nil
		m.free = m.free[:n-1]
		return c
	}
	return make(chan struct{}, 1)
}

// putNotify keeps the notify channel of a closed stream no reader waits
// on, emptied, for takeNotify. Call it with mu held.
func (m *muxProcess) putNotify(c chan struct{}) {
	if len(m.free) >= maxFreeNotify {
		return
	}
	select {
	case <-c:
	default:
	}
	m.free = append(m.free, c)
}
