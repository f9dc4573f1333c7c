package remote_test

import (
	"context"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	paremote "github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/polyweave/polyweave-go/remote"
)

// unaryCalls makes each unary call of protoactor's Remoting service to
// addr, and returns their errors by method.
func unaryCalls(t *testing.T, addr string) map[string]error {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	rc := paremote.NewRemotingClient(cc)
	_, list := rc.ListProcesses(ctx, &paremote.ListProcessesRequest{})
	_, diag := rc.GetProcessDiagnostics(ctx, &paremote.GetProcessDiagnosticsRequest{})
	return map[string]error{"ListProcesses": list, "GetProcessDiagnostics": diag}
}

// wantRefused fails t unless each call was refused as not served: an
// answer that comes at all shows the process still runs (the pinned
// handlers panic, which ends it before it answers).
func wantRefused(t *testing.T, who string, errs map[string]error) {
	t.Helper()
	for method, err := range errs {
		if status.Code(err) != codes.Unimplemented {
			t.Errorf("%s of %s: %v, want it refused (%v)", method, who, err, codes.Unimplemented)
		}
	}
}

// The unary methods of protoactor's Remoting service panic in the pinned
// version, and gRPC does not recover a handler's panic: a node (and a
// client) refuses them, so that one call from whoever reaches its port
// does not end the process.
func TestNode_UnaryCallsRefused(t *testing.T) {
	client, _ := setup(t)
	node := startNode(t, remote.DefaultAddress)
	remoteTools(t, client, node.addr)
	wantRefused(t, "the node", unaryCalls(t, node.addr))
	remoteTools(t, client, node.addr) // still serves
	// The client listens too (this test process: a panic ends the test).
	wantRefused(t, "the client", unaryCalls(t, client.Address()))
	node.stopSeen(t, client)
}

// countingRemoting counts the unary calls that reach it.
type countingRemoting struct {
	paremote.UnimplementedRemotingServer
	reached atomic.Int32
}

func (s *countingRemoting) ListProcesses(context.Context, *paremote.ListProcessesRequest) (*paremote.ListProcessesResponse, error) {
	s.reached.Add(1)
	return &paremote.ListProcessesResponse{}, nil
}

func (s *countingRemoting) GetProcessDiagnostics(context.Context, *paremote.GetProcessDiagnosticsRequest) (*paremote.GetProcessDiagnosticsResponse, error) {
	s.reached.Add(1)
	return &paremote.GetProcessDiagnosticsResponse{}, nil
}

// A remote started elsewhere (a cluster member's) with the Guard's server
// options refuses the unary calls before their handlers run.
func TestGuard_RefusesUnaryCalls(t *testing.T) {
	setup(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(remote.NewGuard(slog.New(slog.DiscardHandler)).ServerOptions()...)
	service := &countingRemoting{}
	paremote.RegisterRemotingServer(srv, service)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		srv.Stop()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	wantRefused(t, "a guarded server", unaryCalls(t, ln.Addr().String()))
	if n := service.reached.Load(); n != 0 {
		t.Errorf("%d unary calls reached their handlers", n)
	}
}
