package remote_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/polyweave/polyweave-go/remote"
	"github.com/polyweave/polyweave-go/remote/remotetest"
)

// envLimitsNode: serve nodeTools at this address with the limits of
// envLimits (MaxConnsPerPeer, the bytes a connection may hold of messages
// not yet whole, MaxCallsPerCaller, HeldMessageTimeout), printing events as runTestNode does.
const (
	envLimitsNode = "POLYWEAVE_REMOTE_TEST_LIMITS_NODE"
	envLimits     = "POLYWEAVE_REMOTE_TEST_LIMITS"
)

func runLimitsNode(addr string) int {
	var perPeer, budget, calls int
	var held time.Duration
	if _, err := fmt.Sscan(os.Getenv(envLimits), &perPeer, &budget, &calls, &held); err != nil {
		fmt.Println("bad", envLimits, err)
		return 1
	}
	if budget > 0 {
		remote.SetConnBudget(budget)
	}
	events := eventPrinter()
	node := listen(&remote.NodeOptions{Address: addr, Tools: nodeTools(events), MaxConnsPerPeer: perPeer, MaxCallsPerCaller: calls,
		HeldMessageTimeout: held}, events)
	if node == nil {
		return 1
	}
	readCommands(node, events, nil)
	return closeNode(node)
}

// startLimitsNode starts an envLimitsNode node allowing perPeer
// connections per peer, each holding at most budget bytes (0: as the
// receive limit needs) for held at most (0: the default), and calls
// calls in flight per caller.
func startLimitsNode(t *testing.T, perPeer, budget, calls int, held time.Duration) *nodeProc {
	t.Helper()
	t.Setenv(envLimits, fmt.Sprint(perPeer, " ", budget, " ", calls, " ", int64(held)))
	return startListening(t, envLimitsNode+"="+remote.DefaultAddress)
}

// allocated asks the node how many bytes its process has allocated so
// far.
func (p *nodeProc) allocated(t *testing.T) uint64 {
	t.Helper()
	if _, err := io.WriteString(p.stdin, "alloc\n"); err != nil {
		t.Fatal(err)
	}
	e := p.next(t)
	n, err := strconv.ParseUint(strings.TrimPrefix(e, "alloc "), 10, 64)
	if err != nil {
		t.Fatalf("node answered %q to alloc", e)
	}
	return n
}

// rawConn is a bare HTTP/2 connection to a node, speaking gRPC's framing
// by hand as a hostile peer would.
type rawConn struct {
	net.Conn
	fr   *http2.Framer
	addr string
}

// dialRaw opens a rawConn to addr, through the preface (its SETTINGS
// sent; the node's are read with the frames that follow).
func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, fr := remotetest.DialHTTP2(t, addr)
	return &rawConn{Conn: c, fr: fr, addr: addr}
}

// headers is the header block of a gRPC call of method path, encoded
// afresh (HPACK without its dynamic table).
func (c *rawConn) headers(t *testing.T, path string) []byte {
	t.Helper()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", path},
		{":authority", c.addr}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			t.Fatal(err)
		}
	}
	return hb.Bytes()
}

// open opens stream id, a call of protoactor's Receive.
func (c *rawConn) open(t *testing.T, id uint32) {
	t.Helper()
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.headers(t, "/remote.Remoting/Receive"), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
}

// claim sends on stream id the prefix of a message of length bytes,
// followed by body bytes of it (in frames of HTTP/2's default size).
func (c *rawConn) claim(t *testing.T, id uint32, length, body int) {
	t.Helper()
	prefix := make([]byte, 5)
	binary.BigEndian.PutUint32(prefix[1:], uint32(length))
	data := append(prefix, make([]byte, body)...)
	for len(data) > 0 {
		n := min(len(data), 16<<10)
		if err := c.fr.WriteData(id, false, data[:n]); err != nil {
			t.Fatal(err)
		}
		data = data[n:]
	}
}

// TestNode_ClaimsSetNothingAside: a peer that opens streams and sends on
// each only the prefix of a message claiming the receive limit (and a
// little of its body) makes the node set aside what it sent, not what it
// claimed: the node allocates far less than one claim in all, where it
// used to allocate each claim whole as the prefix arrived.
func TestNode_ClaimsSetNothingAside(t *testing.T) {
	node := startNode(t, remote.DefaultAddress)
	before := node.allocated(t)
	c := dialRaw(t, node.addr)
	const streams, body = 4, 1 << 10
	for i := range streams {
		id := uint32(2*i + 1)
		c.open(t, id)
		c.claim(t, id, remote.ReceiveLimit, body)
	}
	if err := c.fr.WritePing(false, [8]byte{7}); err != nil {
		t.Fatal(err)
	}
	// The node's answer to the ping comes after it has read the claims.
	// A node that sets aside a claim then asks for its body (a
	// WINDOW_UPDATE of the stream): those are awaited a while after
	// the ping's answer, so that a claim set aside is seen; a node that
	// holds the claims sends none.
	granted, pinged := map[uint32]bool{}, false
	for len(granted) < streams {
		f, err := c.fr.ReadFrame()
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() && pinged {
				break
			}
			t.Fatalf("reading the node's frames: %v", err)
		}
		switch f := f.(type) {
		case *http2.PingFrame:
			if f.IsAck() && !pinged {
				pinged = true
				if err := c.SetReadDeadline(time.Now().Add(2 * time.Second)); err != nil {
					t.Fatal(err)
				}
			}
		case *http2.WindowUpdateFrame:
			if f.StreamID != 0 && f.Increment >= remote.ReceiveLimit/2 {
				granted[f.StreamID] = true
			}
		case *http2.GoAwayFrame, *http2.RSTStreamFrame:
			t.Fatalf("the node ended claims within its limit: %v", f)
		}
	}
	after := node.allocated(t)
	t.Logf("the node allocated %d KiB for %d claims of %d MiB each", (after-before)>>10, streams, remote.ReceiveLimit>>20)
	const bound = 16 << 20
	if got := after - before; got > bound {
		t.Errorf("the node allocated %d MiB for %d claims of %d MiB each with %d bytes of body (streams that asked for their bodies: %d), want at most %d MiB",
			got>>20, streams, remote.ReceiveLimit>>20, body, len(granted), bound>>20)
	}
}

// goAwayOf reads c's frames until a GOAWAY, and returns it; it fails t
// when the connection ends first.
func (c *rawConn) goAwayOf(t *testing.T) *http2.GoAwayFrame {
	t.Helper()
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			t.Fatalf("the connection ended without a GOAWAY: %v", err)
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			return g
		}
	}
}

// TestNode_ConnectionOverItsBudgetIsClosedAndTold: a peer that sends,
// over streams of one connection, more of messages not yet whole than a
// connection may hold has its connection closed, and is told why: a
// GOAWAY (ENHANCE_YOUR_CALM) naming the limit.
func TestNode_ConnectionOverItsBudgetIsClosedAndTold(t *testing.T) {
	const budget = 256 << 10
	node := startLimitsNode(t, 0, budget, 0, 0)
	c := dialRaw(t, node.addr)
	for i := range 2 {
		id := uint32(2*i + 1)
		c.open(t, id)
		c.claim(t, id, 1<<20, budget*3/4)
	}
	g := c.goAwayOf(t)
	if g.ErrCode != http2.ErrCodeEnhanceYourCalm || !strings.Contains(string(g.DebugData()), "not yet whole") {
		t.Errorf("GOAWAY %v %q, want ENHANCE_YOUR_CALM saying the connection held too much", g.ErrCode, g.DebugData())
	}
	for {
		if _, err := c.fr.ReadFrame(); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "reset") {
				break
			}
			t.Fatalf("after the GOAWAY: %v, want the connection closed", err)
		}
	}
}

// TestNode_RefusesConnectionsOverPerPeerLimit: a peer with
// MaxConnsPerPeer connections open has one more refused, told why (a
// GOAWAY naming the limit); once one of its connections closes, it
// connects again.
func TestNode_RefusesConnectionsOverPerPeerLimit(t *testing.T) {
	const perPeer = 2
	node := startLimitsNode(t, perPeer, 0, 0, 0)
	var open []*rawConn
	for range perPeer {
		c := dialRaw(t, node.addr)
		if err := c.fr.WritePing(false, [8]byte{1}); err != nil {
			t.Fatal(err)
		}
		for {
			f, err := c.fr.ReadFrame()
			if err != nil {
				t.Fatalf("connection within the limit: %v", err)
			}
			if p, ok := f.(*http2.PingFrame); ok && p.IsAck() {
				break
			}
			if g, ok := f.(*http2.GoAwayFrame); ok {
				t.Fatalf("connection within the limit refused: %q", g.DebugData())
			}
		}
		open = append(open, c)
	}
	g := dialRaw(t, node.addr).goAwayOf(t)
	if g.ErrCode != http2.ErrCodeEnhanceYourCalm || !strings.Contains(string(g.DebugData()), "too many connections") ||
		!strings.Contains(string(g.DebugData()), "limit of 2") {
		t.Errorf("connection over the limit: GOAWAY %v %q, want ENHANCE_YOUR_CALM naming the limit", g.ErrCode, g.DebugData())
	}
	open[0].Close()
	// The node learns of the close when it reads it: until then a new
	// connection may still be refused.
	for attempt := 0; ; attempt++ {
		c := dialRaw(t, node.addr)
		if err := c.fr.WritePing(false, [8]byte{2}); err != nil {
			t.Fatal(err)
		}
		refused := false
		for {
			f, err := c.fr.ReadFrame()
			if err != nil {
				t.Fatalf("connection after one closed: %v", err)
			}
			if _, ok := f.(*http2.GoAwayFrame); ok {
				refused = true
				break
			}
			if p, ok := f.(*http2.PingFrame); ok && p.IsAck() {
				break
			}
		}
		c.Close()
		if !refused {
			break
		}
		if attempt == 100 {
			t.Fatal("connections still refused after one of the peer's closed")
		}
	}
}

// TestNode_TrickledMessageIsEndedAndTold: a peer that sends part of a
// message and then nothing more of it (however slowly it would go on)
// has its connection closed once the message has been held for the
// node's HeldMessageTimeout, and is told why: a GOAWAY
// (ENHANCE_YOUR_CALM) naming the timeout.
func TestNode_TrickledMessageIsEndedAndTold(t *testing.T) {
	node := startLimitsNode(t, 0, 0, 0, 200*time.Millisecond)
	c := dialRaw(t, node.addr)
	c.open(t, 1)
	c.claim(t, 1, 1<<20, 1<<10)
	g := c.goAwayOf(t)
	if g.ErrCode != http2.ErrCodeEnhanceYourCalm || !strings.Contains(string(g.DebugData()), "not whole within 200ms") {
		t.Errorf("GOAWAY %v %q, want ENHANCE_YOUR_CALM saying the message was held too long", g.ErrCode, g.DebugData())
	}
	if g.LastStreamID != 1 {
		t.Errorf("GOAWAY's last stream %d, want 1 (the stream the node may have served)", g.LastStreamID)
	}
	for {
		if _, err := c.fr.ReadFrame(); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "reset") {
				break
			}
			t.Fatalf("after the GOAWAY: %v, want the connection closed", err)
		}
	}
}
