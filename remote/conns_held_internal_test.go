package remote

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// A peer that trickles a message (a byte now and then, each well within
// any idle limit, never enough to reach the budget) has its connection
// ended once the message has been held for the held-message timeout: a
// GOAWAY says why, gRPC's read fails with ErrHeldTooLong, and what the
// connection held is given back.
func TestHeldConn_TrickledMessageEndsAtTheTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = time.Minute
		server, peer := net.Pipe()
		l := newConnLimits(slog.New(slog.DiscardHandler), 0, timeout)
		held := newHeldConn(server, l, "peer")

		var written bytes.Buffer
		read := make(chan struct{})
		go func() {
			defer close(read)
			_, _ = io.Copy(&written, peer)
		}()
		stop := make(chan struct{})
		sent := make(chan struct{})
		go func() {
			defer close(sent)
			fr := http2.NewFramer(peer, nil)
			_, _ = peer.Write([]byte(clientPreface))
			var hb bytes.Buffer
			_ = hpack.NewEncoder(&hb).WriteField(hpack.HeaderField{Name: ":path", Value: "/test.Echo/Echo"})
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
			_ = fr.WriteData(1, false, message(1<<20, 1)[:grpcPrefix+100])
			// Passed at once: the test sees the message held.
			_ = fr.WritePing(false, [8]byte{1})
			for {
				select {
				case <-stop:
					return
				case <-time.After(10 * time.Second):
				}
				if fr.WriteData(1, false, []byte{1}) != nil {
					return
				}
			}
		}()

		start := time.Now()
		var s1 *heldStream
		buf := make([]byte, 32<<10)
		var err error
		for err == nil {
			_, err = held.Read(buf)
			if s := held.streams[1]; s != nil {
				s1 = s
			}
		}
		ended := time.Since(start)
		close(stop)
		<-sent
		_ = peer.Close()
		<-read

		if !errors.Is(err, ErrHeldTooLong) {
			t.Fatalf("the trickle ended with %v, want %v", err, ErrHeldTooLong)
		}
		if ended < timeout || ended > timeout+refuseLinger+time.Second {
			t.Errorf("the connection ended %v after the message began, want at the timeout (%v)", ended, timeout)
		}
		if !bytes.Contains(written.Bytes(), []byte("not whole within")) {
			t.Errorf("the peer was not told why (a GOAWAY saying so): wrote %q", written.Bytes())
		}
		if s1 == nil {
			t.Fatal("the message was never held")
		}
		if s1.chunks != nil || held.held != 0 || len(held.streams) != 0 {
			t.Errorf("after the end, %d bytes still held (stream 1 keeps %d buffers), want them given back", held.held, len(s1.chunks))
		}
	})
}

// A message that is slow but whole within the timeout, and messages held
// one after another for longer than the timeout in all, pass: the
// timeout is each message's, from its first bytes held. The deadline
// that passes while a later message is held only sets the next one: a
// read cut short so goes on, over TLS too.
func TestHeldConn_SlowMessagesWithinTheTimeoutPass(t *testing.T) {
	for _, secure := range []bool{false, true} {
		name := "plain"
		if secure {
			name = "TLS"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { slowMessages(t, secure) })
		})
	}
}

func slowMessages(t *testing.T, secure bool) {
	const timeout = time.Minute
	server, peer := net.Pipe()
	if secure {
		cfg := selfSigned(t)
		srv := tls.Server(server, cfg)
		cli := tls.Client(peer, &tls.Config{InsecureSkipVerify: true}) // only the records matter here
		done := make(chan error, 1)
		go func() { done <- cli.Handshake() }()
		if err := srv.Handshake(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		server, peer = srv, cli
	}
	held := newHeldConn(server, newConnLimits(slog.New(slog.DiscardHandler), 0, timeout), "peer")
	// On a failure too, the peer's goroutines end.
	defer held.Close()
	go func() { _, _ = io.Copy(io.Discard, peer) }()
	const messages = 5
	msg := message(30<<10, 7)
	go func() {
		fr := http2.NewFramer(peer, nil)
		_, _ = peer.Write([]byte(clientPreface))
		var hb bytes.Buffer
		_ = hpack.NewEncoder(&hb).WriteField(hpack.HeaderField{Name: ":path", Value: "/test.Echo/Echo"})
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
		for range messages {
			// Each message in three parts, 25 s apart: whole after 50
			// s.
			for part := range 3 {
				if part > 0 {
					time.Sleep(25 * time.Second)
				}
				_ = fr.WriteData(1, false, msg[part*len(msg)/3:(part+1)*len(msg)/3])
			}
		}
		_ = peer.Close()
	}()
	b, err := io.ReadAll(held)
	if err != nil && !(secure && errors.Is(err, io.ErrUnexpectedEOF)) {
		t.Fatalf("slow messages within the timeout: the connection ended with %v", err)
	}
	_, data := flowOf(frames(t, bytes.TrimPrefix(b, []byte(clientPreface))), 1)
	if want := bytes.Repeat(msg, messages); !bytes.Equal(data, want) {
		t.Errorf("gRPC read %d bytes of stream 1, want the %d messages whole (%d bytes)", len(data), messages, len(want))
	}
}

// selfSigned is a TLS server configuration with a certificate of its
// own (ECDSA P-256, valid until 2126; the client of these tests does not
// check it).
func selfSigned(t *testing.T) *tls.Config {
	t.Helper()
	cert, err := tls.X509KeyPair([]byte(heldCert), []byte(heldKey))
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}}
}

const heldCert = `-----BEGIN CERTIFICATE-----
MIIBhzCCASygAwIBAgIUQ4sNqp1vfElk3muHyrwfv8wfS2kwCgYIKoZIzj0EAwIw
DzENMAsGA1UEAwwEaGVsZDAgFw0yNjEyMDcwOTMzNTZaGA8yMTI2MTExMzA5MzM1
NlowDzENMAsGA1UEAwwEaGVsZDBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABKR5
+V3mPtIF0+/lWHspIWlS0jnDRtWjidWgR3R+82imYNGvtU5N4SF19T2DfUPDNxxd
0nfhF2hyJPR/qMJrkgOjZDBiMB0GA1UdDgQWBBRqh/U6KE6sJNNLa3m+pTDRyp9C
EDAfBgNVHSMEGDAWgBRqh/U6KE6sJNNLa3m+pTDRyp9CEDAPBgNVHRMBAf8EBTAD
AQH/MA8GA1UdEQQIMAaCBGhlbGQwCgYIKoZIzj0EAwIDSQAwRgIhAKIpiTBmg9Vu
x7LVLg8vFkSLTM2C3HZoI86gqGI3kS1EAiEA+x2WDHt1lYwfHsNHzRRalbNM2gDc
I+rU+qBRSlwoccs=
-----END CERTIFICATE-----`

const heldKey = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgxthOSpxEfCHPzc/P
xOP6GiPq2Eu41V1AotnlWvouR8GhRANCAASkefld5j7SBdPv5Vh7KSFpUtI5w0bV
o4nVoEd0fvNopmDRr7VOTeEhdfU9g31DwzccXdJ34RdociT0f6jCa5ID
-----END PRIVATE KEY-----`

// A HEADERS frame with END_STREAM (trailers) on a stream whose message is
// held reaches gRPC, in its place among the connection's header blocks:
// HPACK's table is the connection's, so a header block dropped or put
// off breaks the decoding of those after it. gRPC gets the stream's end
// before it (RST_STREAM), the bytes dropped in its flow control, and
// never the message's prefix.
func TestHeldConn_TrailersOnAHeldStreamPass(t *testing.T) {
	p := newHeldPeer(1 << 20)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	block := func(fields ...string) []byte {
		hb.Reset()
		for i := 0; i < len(fields); i += 2 {
			if err := enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]}); err != nil {
				t.Fatal(err)
			}
		}
		return bytes.Clone(hb.Bytes())
	}
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	check(p.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(":path", "/a"), EndHeaders: true}))
	sent1 := p.sendPadded(t, 1, message(100<<10, 1)[:60<<10], 16<<10, 0, false)
	// Trailers whose field enters HPACK's table, then a stream whose
	// header block refers to it.
	check(p.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block("x-trailer", "first"), EndHeaders: true, EndStream: true}))
	check(p.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: block(":path", "/b", "x-trailer", "first"), EndHeaders: true}))
	check(p.fr.WriteData(3, false, message(10, 3)))

	b, err := p.readAll(t)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("the connection ended with %v, want its peer's end (EOF)", err)
	}
	fr := http2.NewFramer(nil, bytes.NewReader(b))
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	var got []string
	flow1, reset := 0, false
	for {
		f, err := fr.ReadFrame()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("gRPC would read a broken frame after %v: %v", got, err)
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			var fields []string
			for _, hf := range f.Fields {
				fields = append(fields, hf.Name+"="+hf.Value)
			}
			got = append(got, strings.Join(fields, ",")+endOf(f.StreamEnded()))
		case *http2.RSTStreamFrame:
			if f.StreamID == 1 {
				reset = true
				got = append(got, "RST_STREAM 1")
			}
		case *http2.DataFrame:
			if f.StreamID == 1 {
				flow1 += int(f.Length)
				if !reset && len(f.Data()) > 0 {
					t.Errorf("gRPC read %d bytes of stream 1's message not whole", len(f.Data()))
				}
			}
		}
	}
	want := []string{":path=/a", "RST_STREAM 1", "x-trailer=first END_STREAM", ":path=/b,x-trailer=first"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("gRPC read the header blocks\n%q\nwant\n%q", got, want)
	}
	if flow1 != sent1 {
		t.Errorf("gRPC's flow control counts %d bytes of stream 1, want the %d the peer sent", flow1, sent1)
	}
}

func endOf(ended bool) string {
	if ended {
		return " END_STREAM"
	}
	return ""
}

// The bytes of an abandoned message go back to gRPC's flow control in as
// few DATA frames as the frame size allows, not in frames of the 256
// bytes padding alone can carry.
func TestHeldConn_AbandonedBytesReturnInFewFrames(t *testing.T) {
	p := newHeldPeer(2 << 20)
	p.headers(t, 1)
	sent := p.sendPadded(t, 1, message(2<<20, 1)[:1<<20], 16<<10, 0, false)
	if err := p.fr.WriteRSTStream(1, http2.ErrCodeCancel); err != nil {
		t.Fatal(err)
	}
	b, err := p.readAll(t)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("the connection ended with %v, want its peer's end (EOF)", err)
	}
	count, flow, after := 0, 0, false
	for _, f := range frames(t, b) {
		switch f := f.(type) {
		case *otherFrame:
			if f.typ == http2.FrameRSTStream {
				after = true
			}
		case *heldData:
			if !after {
				t.Fatal("gRPC read DATA of stream 1 before its RST_STREAM")
			}
			count++
			flow += f.flow
		}
	}
	if flow != sent {
		t.Errorf("gRPC's flow control counts %d bytes, want the %d the peer sent", flow, sent)
	}
	if most := (sent + http2MaxFrame - 1) / http2MaxFrame; count > most {
		t.Errorf("%d bytes went back in %d DATA frames, want at most %d", sent, count, most)
	}
}

// A connection that fails (over its budget), or whose peer goes with
// messages held, gives every buffer it held back to the pool: those of
// the streams held, and those lent to gRPC and not read.
func TestHeldConn_EndedConnectionGivesItsBuffersBack(t *testing.T) {
	for _, c := range []struct {
		name   string
		budget int
		want   error
	}{{"over its budget", 300 << 10, ErrConnBudget}, {"peer gone", 4 << 20, io.EOF}} {
		t.Run(c.name, func(t *testing.T) {
			p := newHeldPeer(c.budget)
			for i := range 3 {
				id := uint32(2*i + 1)
				p.headers(t, id)
				p.sendPadded(t, id, message(1<<20, 1)[:200<<10], 16<<10, 0, false)
			}
			seen := map[*heldStream]bool{}
			_, err := p.readAllWatching(t, func() {
				for _, s := range p.held.streams {
					seen[s] = true
				}
			})
			if !errors.Is(err, c.want) {
				t.Fatalf("the connection ended with %v, want %v", err, c.want)
			}
			if len(seen) == 0 {
				t.Fatal("nothing was ever held")
			}
			for s := range seen {
				if s.chunks != nil {
					t.Errorf("a stream keeps %d buffers after the connection ended, want them given back", len(s.chunks))
				}
			}
			if len(p.held.lent) != 0 || len(p.held.streams) != 0 || p.held.held != 0 {
				t.Errorf("after the end: %d buffers lent, %d streams, %d bytes held, want none", len(p.held.lent), len(p.held.streams), p.held.held)
			}
		})
	}
}

// A DATA frame on stream 0 (the connection's, where HTTP/2 allows none)
// passes to gRPC at once, for gRPC to refuse: it is not held as the part
// of a message.
func TestHeldConn_DataOnStreamZeroPasses(t *testing.T) {
	p := newHeldPeer(1 << 20)
	p.fr.AllowIllegalWrites = true
	if err := p.fr.WriteData(0, false, message(100<<10, 1)[:1000]); err != nil {
		t.Fatal(err)
	}
	b, err := p.readAll(t)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("the connection ended with %v, want its peer's end (EOF)", err)
	}
	if !bytes.HasPrefix(b, []byte{0, 3, 232, 0}) {
		t.Errorf("gRPC read %d bytes, want the DATA frame of 1000 bytes on stream 0", len(b))
	}
}

// A message held until it is whole passes to gRPC with the buffers that
// held it, lent until gRPC has read them: the stream that held it keeps
// none, so nothing can give them back to the pool a second time (a free
// of the stream after it passed would).
func TestHeldConn_PassedMessageLeavesItsStreamNoBuffers(t *testing.T) {
	p := newHeldPeer(4 << 20)
	p.headers(t, 1)
	p.headers(t, 3)
	// Stream 3's whole messages pass at once, between the frames of
	// stream 1's message, held meanwhile.
	msg := message(1<<20, 7)
	for part := range slices.Chunk(msg, 16<<10) {
		p.sendPadded(t, 1, part, 16<<10, 0, false)
		p.sendPadded(t, 3, message(10, 3), 16<<10, 0, false)
	}
	seen := map[*heldStream]bool{}
	b, err := p.readAllWatching(t, func() {
		for _, s := range p.held.streams {
			seen[s] = true
		}
	})
	if !errors.Is(err, io.EOF) {
		t.Fatalf("the connection ended with %v, want its peer's end (EOF)", err)
	}
	if len(seen) == 0 {
		t.Fatal("nothing was ever held")
	}
	if _, data := flowOf(frames(t, b), 1); !bytes.Equal(data, msg) {
		t.Fatalf("gRPC read %d bytes of stream 1, want the whole message of %d", len(data), len(msg))
	}
	for s := range seen {
		if s.chunks != nil || s.bytes != 0 {
			t.Errorf("the stream keeps %d buffers (%d bytes) after its message passed, want none", len(s.chunks), s.bytes)
		}
	}
}
