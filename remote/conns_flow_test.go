package remote_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/polyweave/polyweave-go/remote"
	"github.com/polyweave/polyweave-go/remote/tlstest"
)

// rawCodec carries a gRPC message's bytes as they are.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), b...)
	return nil
}
func (rawCodec) Name() string { return "raw" }

// echoDesc is a service whose one streaming method sends back each
// message it receives.
var echoDesc = grpc.ServiceDesc{ServiceName: "test.Echo", HandlerType: (*any)(nil), Streams: []grpc.StreamDesc{{
	StreamName: "Echo", ServerStreams: true, ClientStreams: true,
	Handler: func(_ any, s grpc.ServerStream) error {
		for {
			var m []byte
			if err := s.RecvMsg(&m); err != nil {
				return nil
			}
			if err := s.SendMsg(&m); err != nil {
				return err
			}
		}
	},
}}}

// echoServer serves echoDesc with the server options of the remote
// package's nodes (ConnServerOptions, with tlsOpts: nil, none) and
// returns a connection to it with dial (its credentials).
func echoServer(t *testing.T, tlsOpts *remote.TLS, dial grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	addr := echoListen(t, tlsOpts)
	cc, err := grpc.NewClient(addr, dial, grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{}),
		grpc.MaxCallRecvMsgSize(remote.ReceiveLimit), grpc.MaxCallSendMsgSize(remote.ReceiveLimit)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// echoListen serves echoDesc as echoServer does, and returns its
// address.
func echoListen(t *testing.T, tlsOpts *remote.TLS) string {
	t.Helper()
	opts, err := remote.ConnServerOptions(nil, 0, tlsOpts)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(append(opts, grpc.ForceServerCodec(rawCodec{}),
		grpc.MaxRecvMsgSize(remote.ReceiveLimit), grpc.MaxSendMsgSize(remote.ReceiveLimit))...)
	srv.RegisterService(&echoDesc, nil)
	return serve(t, srv)
}

// serve serves srv on a port of loopback until the test ends, and returns
// its address.
func serve(t *testing.T, srv *grpc.Server) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(l) }()
	t.Cleanup(func() {
		srv.Stop()
		<-served // TestMain checks for goroutines left
	})
	return l.Addr().String()
}

// echo sends msgs on one stream of cc, and checks that each comes back
// whole.
func echo(ctx context.Context, cc *grpc.ClientConn, msgs ...[]byte) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := cc.NewStream(ctx, &echoDesc.Streams[0], "/test.Echo/Echo")
	if err != nil {
		return err
	}
	for i, m := range msgs {
		if err := s.SendMsg(&m); err != nil {
			return fmt.Errorf("send %d (%d bytes): %w", i, len(m), err)
		}
		var back []byte
		if err := s.RecvMsg(&back); err != nil {
			return fmt.Errorf("receive %d (%d bytes): %w", i, len(m), err)
		}
		if !bytes.Equal(back, m) {
			return fmt.Errorf("message %d (%d bytes) came back as %d other bytes", i, len(m), len(back))
		}
	}
	return s.CloseSend()
}

// TestConnServerOptions_LargeMessagesPass: messages far over HTTP/2's
// initial flow-control window (64 KiB), up to the receive limit, pass a
// server whose connections hold a message's frames until it is whole, in
// turn on one stream and at once on several streams of one connection,
// with and without TLS: the peer is never left waiting for a window that
// only the held bytes would open.
func TestConnServerOptions_LargeMessagesPass(t *testing.T) {
	ca := tlstest.NewCA(t, "polyweave test CA")
	serverTLS := ca.TLS(t, "127.0.0.1")
	_, tlsDial, err := ca.TLS(t, "client").GRPCOptions()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		tls  *remote.TLS
		dial grpc.DialOption
	}{{"plain", nil, grpc.WithTransportCredentials(insecure.NewCredentials())}, {"TLS", serverTLS, tlsDial}} {
		t.Run(c.name, func(t *testing.T) {
			cc := echoServer(t, c.tls, c.dial)
			// Only a failing server makes the test wait this long.
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			msg := func(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }
			if err := echo(ctx, cc, msg(8<<20, 1), msg(1<<10, 2), msg(remote.ReceiveLimit-1<<10, 3)); err != nil {
				t.Fatalf("one stream: %v", err)
			}
			// Several streams at once, whose messages together are what
			// one connection may hold: none waits for another.
			const streams = 4
			var wg sync.WaitGroup
			errs := make(chan error, streams)
			for i := range streams {
				wg.Go(func() {
					if err := echo(ctx, cc, msg(8<<20, byte(10+i)), msg(1<<10, byte(20+i))); err != nil {
						errs <- fmt.Errorf("stream %d: %w", i, err)
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

// TestConnServerOptions_CallAmidOtherFrames: a gRPC call completes over a
// connection that also carries, while its message is held, the frames
// that pass through unchanged: its HEADERS in a HEADERS frame and
// CONTINUATIONs, PRIORITY, padded DATA frames, PING, SETTINGS and
// WINDOW_UPDATE; the server answers the PING and SETTINGS at once (while
// the message is not yet whole), and the message comes back whole.
func TestConnServerOptions_CallAmidOtherFrames(t *testing.T) {
	c := dialRaw(t, echoListen(t, nil))
	block := c.headers(t, "/test.Echo/Echo")
	third := len(block) / 3
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	check(c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:third],
		Priority: http2.PriorityParam{Weight: 20}}))
	check(c.fr.WriteContinuation(1, false, block[third:2*third]))
	check(c.fr.WriteContinuation(1, true, block[2*third:]))
	check(c.fr.WritePriority(1, http2.PriorityParam{Weight: 100}))
	msg := make([]byte, 5, 5+300<<10)
	binary.BigEndian.PutUint32(msg[1:], 300<<10)
	for i := range 300 << 10 {
		msg = append(msg, byte(i*7))
	}
	// Half the message, in padded frames.
	send := func(data []byte) {
		for len(data) > 0 {
			n := min(len(data), 9000)
			check(c.fr.WriteDataPadded(1, false, data[:n], make([]byte, n%256)))
			data = data[n:]
		}
	}
	send(msg[:len(msg)/2])
	// While it is held:
	check(c.fr.WritePing(false, [8]byte{1, 2, 3}))
	check(c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20}))
	check(c.fr.WriteWindowUpdate(0, 1<<20))
	check(c.fr.WriteWindowUpdate(1, 1<<20))
	pinged, settled := false, false
	for !pinged || !settled {
		f, err := c.fr.ReadFrame()
		if err != nil {
			t.Fatalf("waiting for the answers to the PING and SETTINGS: %v", err)
		}
		switch f := f.(type) {
		case *http2.PingFrame:
			if f.IsAck() && f.Data == [8]byte{1, 2, 3} {
				pinged = true
			}
		case *http2.SettingsFrame:
			if f.IsAck() {
				settled = true
			} else {
				check(c.fr.WriteSettingsAck())
			}
		case *http2.DataFrame:
			t.Fatalf("the server answered a message not yet whole")
		case *http2.GoAwayFrame, *http2.RSTStreamFrame:
			t.Fatalf("the server ended the call: %v", f)
		}
	}
	send(msg[len(msg)/2:])
	var back []byte
	for len(back) < len(msg) {
		f, err := c.fr.ReadFrame()
		if err != nil {
			t.Fatalf("after %d bytes of the answer: %v", len(back), err)
		}
		switch f := f.(type) {
		case *http2.DataFrame:
			back = append(back, f.Data()...)
		case *http2.GoAwayFrame, *http2.RSTStreamFrame:
			t.Fatalf("the server ended the call: %v", f)
		}
	}
	if !bytes.Equal(back, msg) {
		t.Errorf("the message (%d bytes with its prefix) came back as %d other bytes", len(msg), len(back))
	}
	check(c.fr.WriteGoAway(1, http2.ErrCodeNo, nil))
}
