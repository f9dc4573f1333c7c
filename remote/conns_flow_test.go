package remote_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

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
	opts, err := remote.ConnServerOptions(nil, 0, tlsOpts)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(append(opts, grpc.ForceServerCodec(rawCodec{}),
		grpc.MaxRecvMsgSize(remote.ReceiveLimit), grpc.MaxSendMsgSize(remote.ReceiveLimit))...)
	srv.RegisterService(&echoDesc, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(l) }()
	cc, err := grpc.NewClient(l.Addr().String(), dial, grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{}),
		grpc.MaxCallRecvMsgSize(remote.ReceiveLimit), grpc.MaxCallSendMsgSize(remote.ReceiveLimit)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		srv.Stop()
		<-served // TestMain checks for goroutines left
	})
	return cc
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
