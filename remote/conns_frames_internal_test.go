package remote

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// scriptedConn is a peer's connection that sends what was written to in
// (the preface and frames of a test), then ends; what the server writes
// is kept.
type scriptedConn struct {
	net.Conn
	in      bytes.Buffer
	written bytes.Buffer
}

func (c *scriptedConn) Read(p []byte) (int, error) {
	// A few bytes at a time: frames arrive split, as they may.
	return c.in.Read(p[:min(len(p), 7000)])
}
func (c *scriptedConn) Write(p []byte) (int, error)      { return c.written.Write(p) }
func (c *scriptedConn) SetReadDeadline(time.Time) error  { return nil }
func (c *scriptedConn) SetWriteDeadline(time.Time) error { return nil }

// heldPeer drives a heldConn with the frames a peer writes (fr), and
// reads what gRPC would read of it.
type heldPeer struct {
	raw  *scriptedConn
	held *heldConn
	fr   *http2.Framer
}

func newHeldPeer(budget int) *heldPeer {
	raw := &scriptedConn{}
	raw.in.WriteString(clientPreface)
	l := newConnLimits(slog.New(slog.DiscardHandler), 0, 0)
	l.budget = budget
	return &heldPeer{raw: raw, held: newHeldConn(raw, l, "peer"), fr: http2.NewFramer(&raw.in, nil)}
}

// readAll reads what gRPC would read until the connection ends, and
// returns it (without the preface) with the error that ended it.
func (p *heldPeer) readAll(t *testing.T) ([]byte, error) {
	t.Helper()
	var out bytes.Buffer
	buf := make([]byte, 32<<10)
	for {
		n, err := p.held.Read(buf)
		out.Write(buf[:n])
		if err != nil {
			b := out.Bytes()
			if !bytes.HasPrefix(b, []byte(clientPreface)) {
				t.Fatalf("gRPC read %q first, want the preface", b[:min(len(b), 24)])
			}
			return b[len(clientPreface):], err
		}
	}
}

// frames parses what gRPC read into its frames.
func frames(t *testing.T, b []byte) []http2.Frame {
	t.Helper()
	fr := http2.NewFramer(nil, bytes.NewReader(b))
	fr.SetMaxReadFrameSize(1 << 24)
	var fs []http2.Frame
	for {
		f, err := fr.ReadFrame()
		if errors.Is(err, io.EOF) {
			return fs
		}
		if err != nil {
			t.Fatalf("gRPC would read a broken frame after %d: %v", len(fs), err)
		}
		// ReadFrame reuses its frames: keep what the test looks at.
		switch f := f.(type) {
		case *http2.DataFrame:
			fs = append(fs, &heldData{stream: f.StreamID, data: bytes.Clone(f.Data()), flow: int(f.Length), end: f.StreamEnded()})
		default:
			fs = append(fs, &otherFrame{typ: f.Header().Type, stream: f.Header().StreamID, flags: f.Header().Flags})
		}
	}
}

type heldData struct {
	http2.Frame
	stream uint32
	data   []byte
	flow   int // the frame's length: what flow control counts, padding included
	end    bool
}

type otherFrame struct {
	http2.Frame
	typ    http2.FrameType
	stream uint32
	flags  http2.Flags
}

// message is a gRPC message of n bytes (its prefix, then n bytes of b).
func message(n int, b byte) []byte {
	m := make([]byte, grpcPrefix, grpcPrefix+n)
	binary.BigEndian.PutUint32(m[1:], uint32(n))
	return append(m, bytes.Repeat([]byte{b}, n)...)
}

// sendPadded writes data on stream id in DATA frames of at most size
// bytes of data, each with pad bytes of padding, and returns the bytes
// flow control counts for them.
func (p *heldPeer) sendPadded(t *testing.T, id uint32, data []byte, size int, pad uint8, end bool) (flow int) {
	t.Helper()
	for len(data) > 0 {
		n := min(len(data), size)
		var padding []byte // nil: not padded
		if pad > 0 {
			padding = make([]byte, pad)
		}
		if err := p.fr.WriteDataPadded(id, end && n == len(data), data[:n], padding); err != nil {
			t.Fatal(err)
		}
		flow += n
		if pad > 0 {
			flow += 1 + int(pad)
		}
		data = data[n:]
	}
	return flow
}

func (p *heldPeer) headers(t *testing.T, id uint32) {
	t.Helper()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":path", "/test.Echo/Echo"}, {"content-type", "application/grpc"}} {
		if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
}

// flowOf sums the flow-controlled bytes of stream id's DATA frames.
func flowOf(fs []http2.Frame, id uint32) (flow int, data []byte) {
	for _, f := range fs {
		if d, ok := f.(*heldData); ok && d.stream == id {
			flow += d.flow
			data = append(data, d.data...)
		}
	}
	return flow, data
}

// A RST_STREAM in the middle of a message held frees what the stream
// held: the connection's budget is whole again (a message of about the
// budget passes on another stream), its held buffers are given back, gRPC
// gets the RST_STREAM, and the connection's flow control counts what the
// peer sent, padding included.
func TestHeldConn_ResetMidMessageFreesItsBytes(t *testing.T) {
	const budget = 256 << 10
	p := newHeldPeer(budget)
	p.headers(t, 1)
	part := message(budget, 1)[:budget*3/4]
	sent1 := p.sendPadded(t, 1, part, 1000, 200, false)
	if err := p.fr.WriteRSTStream(1, http2.ErrCodeCancel); err != nil {
		t.Fatal(err)
	}
	p.headers(t, 3)
	// The largest message the budget holds, in frames of HTTP/2's
	// default size.
	size := budget - streamOverhead - (budget/(16<<10)+2)*http2FrameHeader - grpcPrefix
	whole := message(size, 3)
	sent3 := p.sendPadded(t, 3, whole, 16<<10, 0, false)

	var s1 *heldStream
	b, err := p.readAllWatching(t, func() {
		if s := p.held.streams[1]; s != nil {
			s1 = s
		}
	})
	if !errors.Is(err, io.EOF) {
		t.Fatalf("the connection ended with %v, want its peer's end (EOF)", err)
	}
	if s1 == nil {
		t.Fatal("stream 1's part of a message was never held")
	}
	if p.held.held != 0 || len(p.held.streams) != 0 {
		t.Errorf("%d bytes still held on %d streams, want none", p.held.held, len(p.held.streams))
	}
	if s1.chunks != nil || s1.bytes != 0 {
		t.Errorf("stream 1 keeps %d buffers (%d bytes) after its reset, want them given back", len(s1.chunks), s1.bytes)
	}
	fs := frames(t, b)
	reset := false
	for _, f := range fs {
		if o, ok := f.(*otherFrame); ok && o.typ == http2.FrameRSTStream && o.stream == 1 {
			reset = true
		}
	}
	if !reset {
		t.Error("gRPC never got stream 1's RST_STREAM")
	}
	if flow, _ := flowOf(fs, 1); flow != sent1 {
		t.Errorf("gRPC's flow control counts %d bytes of stream 1, want the %d the peer sent", flow, sent1)
	}
	flow, data := flowOf(fs, 3)
	if flow != sent3 || !bytes.Equal(data, whole) {
		t.Errorf("stream 3: gRPC read %d bytes (%d counted), want the message of %d whole", len(data), flow, len(whole))
	}
}

// readAllWatching is readAll, calling watch after each read.
func (p *heldPeer) readAllWatching(t *testing.T, watch func()) ([]byte, error) {
	t.Helper()
	var out bytes.Buffer
	buf := make([]byte, 32<<10)
	for {
		n, err := p.held.Read(buf)
		watch()
		out.Write(buf[:n])
		if err != nil {
			return bytes.TrimPrefix(out.Bytes(), []byte(clientPreface)), err
		}
	}
}

// A peer that trickles a message (a byte per frame, one frame per ping
// it answers, for ever) makes the connection hold no more than its
// budget: each frame counts, with its header, so the connection is
// closed (ErrConnBudget, told in a GOAWAY) once the trickle is over the
// budget, whatever its pace. (A trickle too slow to reach the budget
// ends at the held-message timeout: see
// TestHeldConn_TrickledMessageEndsAtTheTimeout.)
func TestHeldConn_TrickleEndsAtTheBudget(t *testing.T) {
	const budget = 4 << 10
	p := newHeldPeer(budget)
	p.headers(t, 1)
	p.sendPadded(t, 1, message(1<<20, 1)[:grpcPrefix], 16<<10, 0, false)
	for i := range budget {
		if err := p.fr.WriteData(1, false, []byte{1}); err != nil {
			t.Fatal(err)
		}
		if err := p.fr.WritePing(false, [8]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	most := 0
	_, err := p.readAllWatching(t, func() { most = max(most, p.held.held) })
	if !errors.Is(err, ErrConnBudget) {
		t.Fatalf("the trickle ended with %v, want %v", err, ErrConnBudget)
	}
	if most > budget {
		t.Errorf("the connection held %d bytes, over its budget of %d", most, budget)
	}
	if !bytes.Contains(p.raw.written.Bytes(), []byte("not yet whole")) {
		t.Errorf("the peer was not told why (wrote %q)", p.raw.written.Bytes())
	}
}

// The frames of the connection, and of streams, that are not a held
// message's pass on unchanged and in order, at once, while a message is
// held: PING, SETTINGS (and their ACKs), WINDOW_UPDATE, PRIORITY, HEADERS
// with CONTINUATION, GOAWAY; a held message's padded DATA frames reach
// gRPC unchanged once it is whole, their padding counted, and so does
// the padding of a message that never ends.
func TestHeldConn_OtherFramesPassInOrder(t *testing.T) {
	p := newHeldPeer(1 << 20)
	p.headers(t, 1)
	msg := message(100<<10, 1)
	sent1 := p.sendPadded(t, 1, msg[:50<<10], 3000, 17, false)
	// While stream 1's message is held:
	var want []http2.FrameType
	must := func(typ http2.FrameType, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, typ)
	}
	must(http2.FramePing, p.fr.WritePing(false, [8]byte{1}))
	must(http2.FrameSettings, p.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20}))
	must(http2.FrameSettings, p.fr.WriteSettingsAck())
	must(http2.FrameWindowUpdate, p.fr.WriteWindowUpdate(0, 1000))
	must(http2.FrameWindowUpdate, p.fr.WriteWindowUpdate(1, 1000))
	must(http2.FramePriority, p.fr.WritePriority(1, http2.PriorityParam{Weight: 7}))
	must(http2.FramePriority, p.fr.WritePriority(3, http2.PriorityParam{StreamDep: 1, Weight: 3}))
	must(http2.FrameHeaders, p.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: []byte{0x83}}))
	must(http2.FrameContinuation, p.fr.WriteContinuation(3, false, []byte{0x86}))
	must(http2.FrameContinuation, p.fr.WriteContinuation(3, true, []byte{0x84}))
	// Stream 3 sends a whole message in one padded frame: it passes at
	// once.
	must(http2.FrameData, p.fr.WriteDataPadded(3, false, message(10, 3), make([]byte, 255)))
	must(http2.FramePing, p.fr.WritePing(true, [8]byte{2}))
	sent1 += p.sendPadded(t, 1, msg[50<<10:], 5000, 255, false)
	// Stream 1's message, now whole.
	for range (len(msg[50<<10:]) + 4999) / 5000 {
		want = append(want, http2.FrameData)
	}
	// Stream 5's message never ends: its stream does.
	p.headers(t, 5)
	sent5 := p.sendPadded(t, 5, message(8<<10, 5)[:6<<10], 1000, 100, true)
	must(http2.FrameGoAway, p.fr.WriteGoAway(5, http2.ErrCodeNo, []byte("bye")))

	b, err := p.readAll(t)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("the connection ended with %v, want its peer's end (EOF)", err)
	}
	fs := frames(t, b)
	// The frames other than streams 1's and 5's DATA, in order; stream
	// 1's DATA only after the last of them sent while it was held.
	want = append([]http2.FrameType{http2.FrameHeaders}, want...)
	want = slices.DeleteFunc(want, func(typ http2.FrameType) bool { return typ == http2.FrameData })
	want = slices.Insert(want, len(want)-1, http2.FrameHeaders, http2.FrameRSTStream)
	want = slices.Insert(want, 11, http2.FrameData)
	var got []http2.FrameType
	firstData1, lastPing := -1, -1
	for i, f := range fs {
		switch f := f.(type) {
		case *heldData:
			if f.stream == 1 && firstData1 < 0 {
				firstData1 = i
			}
			if f.stream == 3 {
				got = append(got, http2.FrameData)
			}
		case *otherFrame:
			if f.typ == http2.FramePing {
				lastPing = i
			}
			got = append(got, f.typ)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("gRPC read the frames\n%v\nwant\n%v", got, want)
	}
	if firstData1 < lastPing {
		t.Errorf("stream 1's held DATA frames reached gRPC (at frame %d) before its message was whole (the PING after it at %d)", firstData1, lastPing)
	}
	flow, data := flowOf(fs, 1)
	if flow != sent1 || !bytes.Equal(data, msg) {
		t.Errorf("stream 1: gRPC read %d bytes (%d counted), want the message of %d whole (%d counted)", len(data), flow, len(msg), sent1)
	}
	if flow, _ := flowOf(fs, 5); flow != sent5 {
		t.Errorf("stream 5 (its message never whole): gRPC's flow control counts %d bytes, want the %d the peer sent", flow, sent5)
	}
}
