package remote

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// What a peer's connection can make a node or client hold.
//
// gRPC reads a message's 5-byte prefix and sets aside the length it
// claims (up to the receive limit, maxMessageBytes) before the message
// arrives: with a few bytes per stream, and maxConcurrentStreams streams
// per connection, a peer that never sends the rest pinned 8 × 64 MiB per
// connection, as many connections as it liked, without TLS with no
// certificate at all. So the servers of nodes and clients read their
// connections through a heldConn: it follows the HTTP/2 frames a peer
// sends, and holds back the frames of a stream from the prefix of a
// message until the whole message has arrived (as it arrives, in the
// frames themselves): gRPC sees the prefix only once the bytes it claims
// are there, so what a peer makes the server hold is what it sent. The
// frames held on one connection are bounded (connBudget: one message of
// the receive limit, with its framing); a peer that sends more of
// messages not yet whole has its connection closed, told why (an HTTP/2
// GOAWAY, ENHANCE_YOUR_CALM, whose debug data says it) and logged. gRPC
// itself never waits on what is held: the server's flow-control windows
// (connWindow) let a peer send a whole message of the receive limit
// without gRPC's updates. A claim over the receive limit is passed on at
// once, and gRPC refuses it (RESOURCE_EXHAUSTED) without setting
// anything aside.
//
// A message held must be whole within the held-message timeout
// (NodeOptions.HeldMessageTimeout, ClientOptions.HeldMessageTimeout;
// default DefaultHeldMessageTimeout) of its first bytes held: a peer
// that trickles one (a byte now and then, never reaching the budget)
// has its connection closed so too, told why (ErrHeldTooLong), and what
// it held is freed. The timeout is a read deadline of the connection,
// set when a message is first held with none set, and looked at again
// when it passes: the frames of whole messages never touch it.
//
// A peer (an IP address) has at most maxConnsPerPeer connections to a
// server at once (NodeOptions.MaxConnsPerPeer,
// ClientOptions.MaxConnsPerPeer): one more is refused once through its
// handshake, with a GOAWAY saying so, and logged.

// DefaultMaxConnsPerPeer is how many connections one peer (an IP address)
// may have open to a node or client at once, unless the options say
// otherwise. A client or a node opens one connection to each peer it
// talks to (and a new one when it loses it), so this leaves room for
// many processes on one machine (all of a machine's processes are one
// peer: loopback callers share 127.0.0.1).
const DefaultMaxConnsPerPeer = 64

// ErrTooManyConns is the cause of the refusal (logged by the server, and
// in the debug data of the GOAWAY its peer receives) of a connection over
// a peer's MaxConnsPerPeer.
var ErrTooManyConns = errors.New("too many connections from one peer")

// ErrConnBudget is the cause of the closing (logged by the server, and in
// the debug data of the GOAWAY its peer receives) of a connection that
// sent more of messages not yet whole than a connection may hold.
var ErrConnBudget = errors.New("too many bytes of messages not yet whole on one connection")

// DefaultHeldMessageTimeout is how long a node or client holds a message
// not yet whole (see [ErrHeldTooLong]) unless the options say otherwise:
// a message of the receive limit (64 MiB) arrives within it at 5 Mbit/s.
const DefaultHeldMessageTimeout = 2 * time.Minute

// ErrHeldTooLong is the cause of the closing (logged by the server, and
// in the debug data of the GOAWAY its peer receives) of a connection one
// of whose messages was not whole within the held-message timeout
// ([NodeOptions].HeldMessageTimeout) of its first bytes.
var ErrHeldTooLong = errors.New("a message not whole within the time a connection may hold it")

// connBudget bounds the bytes of the frames a heldConn holds: one message
// of the receive limit, its prefix, and its frames' headers.
const connBudget = maxMessageBytes + maxMessageBytes/http2MaxFrame*http2FrameHeader + 64<<10

// connWindow is the initial HTTP/2 flow-control window of the servers'
// streams and connections: a peer may send a whole message of the
// receive limit (and its prefix) before gRPC, which does not see it while
// it is held, would grant more. gRPC grants the bytes it has received
// only once they make a quarter of the window: up to that many bytes of
// the messages before are not granted yet when a message begins, so the
// window is a third larger than what it must leave room for (with a
// message's worth, the peer would wait for a grant that only the rest of
// the message would bring).
const connWindow = (maxMessageBytes+64<<10)*4/3 + 1

// streamOverhead is what the budget counts for each stream with frames
// held, beside the frames.
const streamOverhead = 256

// HTTP/2 framing (RFC 9113).
const (
	http2FrameHeader  = 9
	http2MaxFrame     = 16 << 10 // what gRPC's server takes (SETTINGS_MAX_FRAME_SIZE)
	frameData         = 0x0
	frameHeaders      = 0x1
	framePriority     = 0x2
	frameRSTStream    = 0x3
	frameGoAway       = 0x7
	frameWindowUpdate = 0x8
	frameContinuation = 0x9
	flagEndStream     = 0x1
	flagPadded        = 0x8
	codeCancel        = 0x8
	codeCalm          = 0xb // ENHANCE_YOUR_CALM
	grpcPrefix        = 5
)

// connLimits is the bookkeeping of a server's incoming connections: how
// many each peer has open, the budget each may hold, and the log of
// their refusals.
type connLimits struct {
	log     *slog.Logger
	perPeer int           // <= 0: no limit
	budget  int           // bytes a connection may hold (connBudget; tests lower it)
	limit   int           // the receive limit of a message (maxMessageBytes)
	timeout time.Duration // how long a message may be held; <= 0: for ever

	mu    sync.Mutex
	peers map[string]int

	refused atomic.Int64 // connections refused or closed, for the log
}

// newConnLimits returns the limits of a server allowing perPeer
// connections per peer (0: DefaultMaxConnsPerPeer; negative: no limit),
// each holding a message not yet whole for timeout at most (0:
// DefaultHeldMessageTimeout; negative: no limit).
func newConnLimits(log *slog.Logger, perPeer int, timeout time.Duration) *connLimits {
	if perPeer == 0 {
		perPeer = DefaultMaxConnsPerPeer
	}
	if timeout == 0 {
		timeout = DefaultHeldMessageTimeout
	}
	return &connLimits{log: log, perPeer: perPeer, budget: testConnBudget(connBudget), limit: maxMessageBytes, timeout: timeout,
		peers: map[string]int{}}
}

// testConnBudget returns budget unless a test lowered it.
var testConnBudget = func(budget int) int { return budget }

// serverOptions wrap creds (nil: none) so that the server reads its
// connections through heldConns, within l's limits, and set the windows
// that this needs (see connWindow).
func (l *connLimits) serverOptions(creds credentials.TransportCredentials) []grpc.ServerOption {
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	return []grpc.ServerOption{grpc.Creds(&limitedCreds{TransportCredentials: creds, l: l}),
		grpc.InitialWindowSize(connWindow), grpc.InitialConnWindowSize(connWindow)}
}

// ConnServerOptions returns the gRPC server options with which the nodes
// and clients of this package bound what one peer's connections can make
// them hold (see [NodeOptions].MaxConnsPerPeer, [ErrTooManyConns],
// [ErrConnBudget]), for a protoactor remote started elsewhere (a cluster
// member's): its credentials (mutual TLS with t, or none when t is nil,
// replacing [TLS.GRPCOptions]' server option) and the flow-control
// windows the bound needs. A message not yet whole is held for
// [DefaultHeldMessageTimeout] at most (see [ConnServerOptionsHeld]).
// maxConnsPerPeer is as NodeOptions.MaxConnsPerPeer (0:
// [DefaultMaxConnsPerPeer]; negative: no limit); logger (nil discards)
// logs the connections refused or closed. It returns an error wrapping
// [ErrTLSConfig] when t has no certificate, no private key or no CAs.
func ConnServerOptions(logger *slog.Logger, maxConnsPerPeer int, t *TLS) ([]grpc.ServerOption, error) {
	return ConnServerOptionsHeld(logger, maxConnsPerPeer, 0, t)
}

// ConnServerOptionsHeld is [ConnServerOptions] with the time a message
// not yet whole may be held, heldMessageTimeout, as
// NodeOptions.HeldMessageTimeout (0: [DefaultHeldMessageTimeout];
// negative: no limit; see [ErrHeldTooLong]).
func ConnServerOptionsHeld(logger *slog.Logger, maxConnsPerPeer int, heldMessageTimeout time.Duration, t *TLS) ([]grpc.ServerOption, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var creds credentials.TransportCredentials
	if t != nil {
		if err := t.check("TLS"); err != nil {
			return nil, err
		}
		creds, _ = t.credentials()
	}
	return newConnLimits(logger, maxConnsPerPeer, heldMessageTimeout).serverOptions(creds), nil
}

// add counts a connection of peer and reports whether it is within the
// limit; done must follow either way.
func (l *connLimits) add(peer string) (count int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.peers[peer]++
	count = l.peers[peer]
	return count, l.perPeer <= 0 || count <= l.perPeer
}

func (l *connLimits) done(peer string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.peers[peer]--; l.peers[peer] <= 0 {
		delete(l.peers, peer)
	}
}

// warn logs a connection refused or closed: the first, then each one that
// doubles their count (a peer can open connections far faster than a log
// should grow).
func (l *connLimits) warn(msg, peer string, err error) {
	if n := l.refused.Add(1); n&(n-1) == 0 {
		l.log.Warn(msg, "peer", peer, "error", err.Error(), "refused_total", n)
	}
}

// limitedCreds are a server's transport credentials (TLS, or none) that
// count each peer's connections, refuse those over the limit, and hand
// gRPC the others as heldConns.
type limitedCreds struct {
	credentials.TransportCredentials
	l *connLimits
}

func (c *limitedCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	peer := peerHost(raw.RemoteAddr())
	count, ok := c.l.add(peer)
	conn, auth, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		c.l.done(peer)
		return nil, nil, err
	}
	if !ok {
		c.l.done(peer)
		err := fmt.Errorf("remote: connection from %s refused: it would be its %dth open at once, over the limit of %d: %w",
			peer, count, c.l.perPeer, ErrTooManyConns)
		c.l.warn("remote connection refused", peer, err)
		refuse(conn, err)
		return nil, nil, err
	}
	return newHeldConn(conn, c.l, peer), auth, nil
}

func (c *limitedCreds) Clone() credentials.TransportCredentials {
	return &limitedCreds{TransportCredentials: c.TransportCredentials.Clone(), l: c.l}
}

// peerHost is the host of addr (a peer's IP), or addr whole.
func peerHost(addr net.Addr) string {
	if addr == nil {
		return ""
	}
	if host, _, err := net.SplitHostPort(addr.String()); err == nil {
		return host
	}
	return addr.String()
}

// refuseLinger bounds how long a refused connection is read (and
// dropped) after its GOAWAY, so that the peer reads the GOAWAY before the
// connection closes (closing with its bytes unread would reset it).
const refuseLinger = time.Second

// refuse tells the peer of a connection gRPC never saw why it is refused
// (an empty SETTINGS, the server's preface, then a GOAWAY with err), and
// closes it.
func refuse(conn net.Conn, err error) {
	settings := []byte{0, 0, 0, 0x4, 0, 0, 0, 0, 0}
	_ = conn.SetDeadline(time.Now().Add(refuseLinger))
	if _, werr := conn.Write(append(settings, goAway(err, 0)...)); werr == nil {
		if cw, ok := conn.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		buf := make([]byte, 4<<10)
		for {
			if _, rerr := conn.Read(buf); rerr != nil {
				break
			}
		}
	}
	_ = conn.Close()
}

// goAway is an HTTP/2 GOAWAY frame (ENHANCE_YOUR_CALM) whose debug data
// is err's text, last the last stream it may have processed: a gRPC
// client fails the streams after it at once, with an error of its own,
// and those up to it when the connection closes, with an error that
// carries the GOAWAY's debug data.
func goAway(err error, last uint32) []byte {
	debug := clip(err.Error(), 512)
	f := make([]byte, http2FrameHeader+8, http2FrameHeader+8+len(debug))
	putFrameHeader(f, 8+len(debug), frameGoAway, 0, 0)
	binary.BigEndian.PutUint32(f[http2FrameHeader:], last&0x7fffffff)
	binary.BigEndian.PutUint32(f[http2FrameHeader+4:], codeCalm)
	return append(f, debug...)
}

// putFrameHeader writes an HTTP/2 frame header into f.
func putFrameHeader(f []byte, length int, typ, flags byte, stream uint32) {
	f[0], f[1], f[2] = byte(length>>16), byte(length>>8), byte(length)
	f[3], f[4] = typ, flags
	binary.BigEndian.PutUint32(f[5:9], stream)
}

// heldConn is a server connection that holds back the frames of a
// stream's message until the message is whole (see above). gRPC reads it
// from one goroutine; it writes from others.
type heldConn struct {
	net.Conn
	l       *connLimits
	peer    string
	release sync.Once

	// The reader's alone.
	buf     []byte    // what Read reads into: raw, then room
	raw     []byte    // bytes read (of buf), not yet a whole frame
	out     [][]byte  // frames (and bytes) gRPC may read, in order
	lent    []*[]byte // chunks of frames held, in out until gRPC has read them
	preface int       // bytes of the client's preface still to pass on
	streams map[uint32]*heldStream
	spare   *heldStream // for a stream with nothing held
	held    int         // bytes held, with streamOverhead per stream
	last    uint32      // the highest stream the peer opened
	due     time.Time   // the read deadline set for a message held; zero: none
	err     error

	// The writers': where the bytes written are in their frames, so
	// that a GOAWAY goes between two frames (see fail).
	wmu    sync.Mutex
	w      cursor // through the frames written
	goaway []byte
}

// heldStream is a stream whose frames are held: its message is not yet
// whole.
type heldStream struct {
	msg    cursor    // through its messages
	chunks []*[]byte // its held frames, back to back, in heldChunks
	bytes  int       // their length
	data   int       // the flow-controlled bytes of its held DATA frames
	since  time.Time // when its message was first held
}

// heldChunk is the size of the buffers (of heldChunks) that hold the
// frames of messages not yet whole: a message is copied once, into
// buffers used again once gRPC has read them, not into one allocation per
// frame.
const heldChunk = 64 << 10

var heldChunks = sync.Pool{New: func() any { b := make([]byte, 0, heldChunk); return &b }}

// put copies f after the stream's held frames.
func (s *heldStream) put(f []byte) {
	s.bytes += len(f)
	for len(f) > 0 {
		if len(s.chunks) == 0 || len(*s.chunks[len(s.chunks)-1]) == heldChunk {
			b := heldChunks.Get().(*[]byte)
			*b = (*b)[:0]
			s.chunks = append(s.chunks, b)
		}
		b := s.chunks[len(s.chunks)-1]
		n := copy((*b)[len(*b):heldChunk], f)
		*b, f = (*b)[:len(*b)+n], f[n:]
	}
}

// free returns the stream's chunks to heldChunks.
func (s *heldStream) free() {
	for _, b := range s.chunks {
		heldChunks.Put(b)
	}
	s.chunks, s.bytes = nil, 0
}

// cursor follows bytes through units that each begin with a prefix of
// len(head) bytes saying the length of the rest (HTTP/2 frames, gRPC
// messages).
type cursor struct {
	head []byte // the prefix being read
	have int    // its bytes read
	left int    // bytes of the unit's rest still to come
}

// between reports whether the cursor is between two units.
func (c *cursor) between() bool { return c.have == 0 && c.left == 0 }

// advance follows p; at each whole prefix it calls length, which returns
// the length of the unit's rest, or -1 to stop: advance then returns
// true.
func (c *cursor) advance(p []byte, length func(head []byte) int) (stopped bool) {
	for len(p) > 0 {
		if c.left > 0 {
			n := min(c.left, len(p))
			c.left, p = c.left-n, p[n:]
			continue
		}
		n := copy(c.head[c.have:], p)
		c.have, p = c.have+n, p[n:]
		if c.have == len(c.head) {
			c.have = 0
			if c.left = length(c.head); c.left < 0 {
				c.left = 0
				return true
			}
		}
	}
	return false
}

func newHeldConn(conn net.Conn, l *connLimits, peer string) *heldConn {
	return &heldConn{Conn: conn, l: l, peer: peer, buf: make([]byte, readBuffer), preface: len(clientPreface), streams: map[uint32]*heldStream{},
		w: cursor{head: make([]byte, http2FrameHeader)}}
}

// readBuffer is the size of a heldConn's buffer: room for what gRPC
// reads at once (32 KiB) beside a frame not yet whole (at most
// http2FrameHeader+http2MaxFrame-1 bytes).
const readBuffer = 64 << 10

// clientPreface is how an HTTP/2 client's connection begins.
const clientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

func (c *heldConn) Close() error {
	c.release.Do(func() { c.l.done(c.peer) })
	return c.Conn.Close()
}

func (c *heldConn) Read(p []byte) (int, error) {
	for len(c.out) == 0 {
		// gRPC has read all it was given: buf, and the chunks lent, are
		// free again.
		c.giveBack()
		if c.err != nil {
			// Nothing more comes: what is held never passes.
			for id, s := range c.streams {
				s.free()
				delete(c.streams, id)
			}
			c.held = 0
			return 0, c.err
		}
		if c.due.IsZero() && len(c.streams) > 0 && c.l.timeout > 0 {
			c.setDue()
		}
		kept := copy(c.buf, c.raw)
		n, err := c.Conn.Read(c.buf[kept:])
		c.raw = c.buf[:kept+n]
		perr := c.parse()
		if perr == nil && err != nil && !c.due.IsZero() && errors.Is(err, os.ErrDeadlineExceeded) {
			// The deadline of a message held, not the peer's end.
			err, perr = nil, c.overdue()
		}
		if perr != nil {
			c.err = perr
			c.l.warn("remote connection closed", c.peer, perr)
			c.fail(perr)
			c.out, c.raw = nil, nil
			c.drain()
		} else if err != nil {
			c.err = err
		}
	}
	n := copy(p, c.out[0])
	if c.out[0] = c.out[0][n:]; len(c.out[0]) == 0 {
		c.out[0] = nil
		c.out = c.out[1:]
	}
	return n, nil
}

// giveBack returns the chunks lent to gRPC, which has read them, to
// heldChunks.
func (c *heldConn) giveBack() {
	for _, b := range c.lent {
		heldChunks.Put(b)
	}
	clear(c.lent)
	c.lent = c.lent[:0]
}

// setDue sets the read deadline of the oldest message held (none: no
// deadline).
func (c *heldConn) setDue() {
	var oldest time.Time
	for _, s := range c.streams {
		if oldest.IsZero() || s.since.Before(oldest) {
			oldest = s.since
		}
	}
	if !oldest.IsZero() {
		oldest = oldest.Add(c.l.timeout)
	}
	if !oldest.Equal(c.due) {
		c.due = oldest
		_ = c.Conn.SetReadDeadline(oldest)
	}
}

// overdue is the error of a connection whose oldest message held has
// been held for the timeout; when there is none (the message that set
// the deadline passed), it sets the deadline of the oldest still held.
func (c *heldConn) overdue() error {
	now := time.Now()
	for id, s := range c.streams {
		if !now.Before(s.since.Add(c.l.timeout)) {
			return fmt.Errorf("remote: connection from %s: a message (%d bytes of it on stream %d) not whole within %v: %w",
				c.peer, s.data, id, c.l.timeout, ErrHeldTooLong)
		}
	}
	c.setDue()
	return nil
}

// parse takes the whole frames of raw, passing them on or holding them.
func (c *heldConn) parse() error {
	if c.preface > 0 {
		n := min(c.preface, len(c.raw))
		c.emit(c.raw[:n])
		c.raw, c.preface = c.raw[n:], c.preface-n
		if c.preface > 0 {
			return nil
		}
	}
	for len(c.raw) >= http2FrameHeader {
		length := frameLength(c.raw)
		if length > http2MaxFrame {
			return fmt.Errorf("remote: connection from %s: a frame of %d bytes, over HTTP/2's %d", c.peer, length, http2MaxFrame)
		}
		if len(c.raw) < http2FrameHeader+length {
			break
		}
		f := c.raw[: http2FrameHeader+length : http2FrameHeader+length]
		c.raw = c.raw[http2FrameHeader+length:]
		if err := c.frame(f); err != nil {
			return err
		}
	}
	return nil
}

// emit passes b (of raw) on to gRPC. buf is read into again only once
// gRPC has read b.
func (c *heldConn) emit(b []byte) {
	if len(b) > 0 {
		c.out = append(c.out, b)
	}
}

// frame passes f on, or holds it with its stream's message.
func (c *heldConn) frame(f []byte) error {
	typ, flags := f[3], f[4]
	id := binary.BigEndian.Uint32(f[5:9]) & 0x7fffffff
	s := c.streams[id]
	if typ != frameData || id == 0 {
		if typ == frameHeaders && id > c.last {
			c.last = id
		}
		if s != nil && (typ == frameRSTStream || typ == frameHeaders || typ == frameContinuation) {
			// The stream's end (RST_STREAM), or a header block, which
			// gRPC must decode in its place among the connection's
			// (their HPACK table is the connection's); on a stream whose
			// message is not whole, it can only end the stream (or the
			// connection: gRPC takes no HEADERS on a stream it has).
			c.abandon(id, s, f, 0)
			return nil
		}
		// The connection's (a DATA frame there is gRPC's to refuse), of
		// a stream with nothing held, or about
		// what the server sends (WINDOW_UPDATE) or nothing gRPC uses
		// (PRIORITY): at once, whatever the stream holds.
		c.emit(f)
		return nil
	}
	data, ok := dataOf(f)
	if !ok {
		return fmt.Errorf("remote: connection from %s: a malformed DATA frame (its padding)", c.peer)
	}
	flow := len(f) - http2FrameHeader
	fresh := s == nil
	if fresh {
		// Most DATA frames hold whole messages: one spare stream serves
		// them all, until one is held.
		if c.spare == nil {
			c.spare = &heldStream{msg: cursor{head: make([]byte, grpcPrefix)}}
		}
		s = c.spare
		s.msg.have, s.msg.left, s.data = 0, 0, 0
	}
	if over := s.msg.advance(data, c.messageLength); over {
		// gRPC refuses the claim (RESOURCE_EXHAUSTED) before it sets
		// anything aside: it gets what was held, and this.
		if !fresh {
			c.unhold(id, s)
		}
		c.emit(f)
		return nil
	}
	whole := s.msg.between()
	switch {
	case fresh && whole:
		c.emit(f)
	case !whole && flags&flagEndStream != 0:
		// The stream ends with its message not whole: gRPC must not
		// see its prefix.
		c.abandon(id, s, nil, flow)
	default:
		if err := c.hold(id, s, f, flow); err != nil {
			return err
		}
		if whole {
			c.unhold(id, s)
		}
	}
	return nil
}

// dataOf returns the data of a DATA frame f (its padding off), or false
// when its padding does not fit.
func dataOf(f []byte) ([]byte, bool) {
	payload := f[http2FrameHeader:]
	if f[4]&flagPadded == 0 {
		return payload, true
	}
	if len(payload) == 0 || int(payload[0]) > len(payload)-1 {
		return nil, false
	}
	return payload[1 : len(payload)-int(payload[0])], true
}

// messageLength is the length a gRPC message's prefix claims, or -1 when
// it is over the receive limit.
func (c *heldConn) messageLength(prefix []byte) int {
	length := binary.BigEndian.Uint32(prefix[1:])
	if uint64(length) > uint64(c.l.limit) {
		return -1
	}
	return int(length)
}

// frameLength is the length of the payload an HTTP/2 frame's header
// says.
func frameLength(header []byte) int { return int(header[0])<<16 | int(header[1])<<8 | int(header[2]) }

// hold adds f (flow bytes of it flow-controlled) to the frames held for
// stream id, within the connection's budget.
func (c *heldConn) hold(id uint32, s *heldStream, f []byte, flow int) error {
	held, streams := c.held+len(f), len(c.streams)
	if c.streams[id] == nil {
		held, streams = held+streamOverhead, streams+1
	}
	// Checked before f is copied: the connection never holds more than
	// its budget.
	if held > c.l.budget {
		return fmt.Errorf("remote: connection from %s: it would make it hold %d bytes of messages not yet whole (on %d streams), over the limit of %d: %w",
			c.peer, held, streams, c.l.budget, ErrConnBudget)
	}
	if c.streams[id] == nil {
		if s == c.spare {
			c.spare = nil
		}
		c.streams[id] = s
		if c.l.timeout > 0 {
			s.since = time.Now()
		}
	}
	// A copy: buf is read into again.
	s.put(f)
	s.data += flow
	c.held = held
	return nil
}

// unhold passes on the frames held for stream id, and forgets it. Its
// chunks go with them, lent to gRPC (see giveBack): s keeps none, so
// that nothing returns them to heldChunks a second time.
func (c *heldConn) unhold(id uint32, s *heldStream) {
	for _, b := range s.chunks {
		c.out = append(c.out, *b)
	}
	c.lent = append(c.lent, s.chunks...)
	c.held -= s.bytes + streamOverhead
	delete(c.streams, id)
	s.chunks, s.bytes = nil, 0
}

// abandon drops the frames held for stream id, whose message will never
// be whole (the stream ends: with f, or with a DATA frame of flow bytes;
// or f is a header block, which gRPC must read in its place): gRPC gets
// the stream's end (f, or a RST_STREAM), then DATA frames that count, in
// the connection's flow control, the bytes dropped (gRPC grants them
// again, as it would have), then f if it is a header block. gRPC drops
// the data of a stream it has ended: the frames are as large as it
// takes them, their data zeros.
func (c *heldConn) abandon(id uint32, s *heldStream, f []byte, flow int) {
	dropped := flow
	if s != nil && c.streams[id] != nil {
		dropped += s.data
		c.held -= s.bytes + streamOverhead
		s.free()
		delete(c.streams, id)
	}
	if f != nil && f[3] == frameRSTStream {
		c.out = append(c.out, f)
	} else {
		rst := make([]byte, http2FrameHeader+4)
		putFrameHeader(rst, 4, frameRSTStream, 0, id)
		binary.BigEndian.PutUint32(rst[http2FrameHeader:], codeCancel)
		c.out = append(c.out, rst)
	}
	for dropped > 0 {
		n := min(dropped, http2MaxFrame)
		h := make([]byte, http2FrameHeader)
		putFrameHeader(h, n, frameData, 0, id)
		c.out = append(c.out, h, zeros[:n])
		dropped -= n
	}
	if f != nil && f[3] != frameRSTStream {
		c.out = append(c.out, f)
	}
}

// zeros is the payload of the DATA frames of abandon (gRPC only reads
// it).
var zeros = make([]byte, http2MaxFrame)

// drain reads (and drops) what the peer still sends, for refuseLinger at
// most, before gRPC closes the connection: closed with bytes unread, it
// would be reset, and the peer might lose the GOAWAY that says why.
func (c *heldConn) drain() {
	_ = c.Conn.SetReadDeadline(time.Now().Add(refuseLinger))
	for {
		if _, err := c.Conn.Read(c.buf); err != nil {
			return
		}
	}
}

// Write passes gRPC's bytes on, following their frames so that fail can
// put a GOAWAY between two of them.
func (c *heldConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	n, err := c.Conn.Write(p)
	c.w.advance(p[:n], frameLength)
	if err == nil && c.goaway != nil && c.w.between() {
		_, _ = c.Conn.Write(c.goaway)
		c.goaway = nil
	}
	return n, err
}

// fail tells the peer why its connection closes (a GOAWAY with err, as
// soon as what gRPC writes is between two frames); gRPC closes it when
// its read fails.
func (c *heldConn) fail(err error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	g := goAway(err, c.last)
	if !c.w.between() {
		c.goaway = g
		return
	}
	_ = c.Conn.SetWriteDeadline(time.Now().Add(refuseLinger))
	_, _ = c.Conn.Write(g)
}
