package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	paremote "github.com/asynkron/protoactor-go/remote"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/pgstore"
	"github.com/polyweave/polyweave-go/durability/pgstore/pgtest"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/remote"
	"github.com/polyweave/polyweave-go/tools"
)

// Figure 8: beyond one machine. A remote tool's call round trip over
// loopback gRPC against bare protoactor remote request/response, and the
// PostgreSQL store under the streaming router (chunks/s with 64 streams,
// recovery of 10 000 pending calls) and under 64 concurrent writers.
//
// The far side of each round trip is a separate process (this binary,
// started again as a peer): a process runs one protoactor remote at a time,
// since two in one process race on gRPC's global logger. The PostgreSQL
// server is a throwaway one (pgtest) with fsync on, started for the figure
// and removed after it.

func figureCluster(c *config) []Row {
	pg := &pgServer{fsync: !c.smoke}
	defer pg.stop()
	streams := 64
	if c.smoke {
		streams = 2
	}
	chunks := func(name string, open storeOpener, sessions int) side {
		return metricSide(name, "chunks/s", func(b *testing.B) { benchRouterChunksOn(b, open, sessions) })
	}
	return c.rows([]pair{
		{figure: "8", name: "remote tool call round trip, loopback", ours: benchSide("remote tool", benchRemoteToolCall),
			base: benchSide("protoactor remote request/response", benchBareRemoteRequest),
			kind: duration, unit: "call", goal: ratioAtMost(1.5)},
		{figure: "8", name: fmt.Sprintf("router chunks/s, PostgreSQL, %d streams", streams), ours: chunks("PostgreSQL", pg.open, streams),
			base: chunks("bbolt", openBolt(nil), streams), kind: throughput, unit: "chunks", goal: oursAtLeast(50_000, "≥ 50 000/s"),
			note: "both fsync every commit: on a machine whose fsync is slow both are bounded by it; the ratio is the comparable figure"},
		{figure: "8", name: "router recovery of 10 000 pending calls (PostgreSQL)",
			ours: benchSide("router", func(b *testing.B) { benchRouterRecoveryOn(b, pg.open) }),
			kind: duration, unit: "recovery", goal: oursAtMost(500_000, "< 500 ms")},
		{figure: "8", name: "store: persist, PostgreSQL vs bbolt, 64 writers",
			ours: benchSide("pgstore", func(b *testing.B) { benchPersist(b, 64, pg.open) }),
			base: benchSide("boltstore", func(b *testing.B) { benchPersist(b, 64, openBolt(nil)) }),
			kind: throughput, unit: "events", goal: info},
	})
}

// pgServer starts a throwaway PostgreSQL server on first use.
type pgServer struct {
	fsync  bool
	once   sync.Once
	srv    *pgtest.Server
	err    error
	schema atomic.Int64
}

// open is a storeOpener: a store in a fresh schema of the server.
func (p *pgServer) open(b *testing.B) durability.Store {
	p.once.Do(func() { p.srv, p.err = pgtest.Start(&pgtest.Options{Fsync: p.fsync}) })
	if p.err != nil {
		b.Fatal(p.err)
	}
	s, err := pgstore.Open(context.Background(), p.srv.DSN, &pgstore.Options{Schema: fmt.Sprintf("bench_%d", p.schema.Add(1))})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

func (p *pgServer) stop() {
	if p.srv != nil {
		_ = p.srv.Stop()
	}
}

// envPeer makes this binary a round-trip peer: "node" serves a no-op tool
// with remote.Serve, "bare" a bare protoactor responder. The peer prints
// its address and serves until its stdin closes.
const envPeer = "POLYWEAVE_BENCH_PEER"

// bareResponderName is the bare peer's responder actor.
const bareResponderName = "responder"

// servePeer runs this process as a peer if envPeer says so, and reports
// whether it did (main then returns).
func servePeer() bool {
	kind := os.Getenv(envPeer)
	if kind == "" {
		return false
	}
	var addr string
	var stop func()
	switch kind {
	case "node":
		node, err := remote.Serve(&remote.NodeOptions{Tools: []*tools.Tool{noopRemoteTool()}})
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench peer:", err)
			os.Exit(1)
		}
		addr, stop = node.Address(), func() { node.Close(context.Background()) }
	case "bare":
		system := quietSystem()
		r := paremote.NewRemote(system, paremote.Configure("127.0.0.1", 0))
		r.Start()
		if _, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return bareResponder{} }), bareResponderName); err != nil {
			fmt.Fprintln(os.Stderr, "bench peer:", err)
			os.Exit(1)
		}
		addr, stop = system.Address(), func() { stopBareRemote(system, r) }
	default:
		fmt.Fprintf(os.Stderr, "bench peer: unknown kind %q\n", kind)
		os.Exit(2)
	}
	fmt.Println(addr)
	_, _ = io.Copy(io.Discard, os.Stdin)
	stop()
	return true
}

func noopRemoteTool() *tools.Tool {
	return tools.MustNew(tools.Definition{Name: "noop", Sync: true})
}

func quietSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
}

// startPeer starts this binary as a peer of the given kind and returns its
// address; b's cleanup stops it.
func startPeer(b *testing.B, kind string) string {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envPeer+"="+kind)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("peer %s: %v", kind, err)
	}
	return strings.TrimSpace(line)
}

// benchRemoteToolCall is one call of a remote no-op tool: TOOL_CALL into
// the host's tool duplex, its handler sends it to the node over loopback
// gRPC, the node's tool duplex runs it, and the TOOL_RESULT comes back to
// the host's duplex, which emits it (and END).
func benchRemoteToolCall(b *testing.B) {
	addr := startPeer(b, "node")
	rt, err := actors.NewRuntime(nil)
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(context.Background())
	client, err := remote.NewClient(nil)
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ts, err := client.Tools(ctx, addr)
	if err != nil {
		b.Fatal(err)
	}
	conn, err := rt.Start(ts[0].Spec())
	if err != nil {
		b.Fatal(err)
	}
	call := func(i int) {
		id := fmt.Sprint("c", i)
		if err := conn.Send(messages.ToolCall("s", id, "noop", json.RawMessage(`{}`))); err != nil {
			b.Fatal(err)
		}
		for {
			f, err := conn.Recv(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if f.GetType() == messages.FrameType_TOOL_RESULT && f.IsErrorResult() {
				b.Fatalf("remote call failed: %s", f.GetPayload())
			}
			if f.GetType() == messages.FrameType_END {
				return
			}
		}
	}
	call(-1) // connected
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		call(i)
	}
	b.StopTimer()
}

// benchBareRemoteRequest is one protoactor RequestFuture to an actor in
// the peer process over loopback gRPC, answered with a frame.
func benchBareRemoteRequest(b *testing.B) {
	addr := startPeer(b, "bare")
	system := quietSystem()
	r := paremote.NewRemote(system, paremote.Configure("127.0.0.1", 0))
	r.Start()
	defer stopBareRemote(system, r)
	pid := actor.NewPID(addr, bareResponderName)
	f := messages.ToolCall("s", "c1", "noop", json.RawMessage(`{}`))
	if _, err := system.Root.RequestFuture(pid, f, 30*time.Second).Result(); err != nil {
		b.Fatal(err) // connected
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := system.Root.RequestFuture(pid, f, 30*time.Second).Result(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
}

// stopBareRemote stops a bare remote the way package remote stops its own
// (the gRPC server, then the endpoint actors, which close their
// connections) and then the system: the remote's own graceful shutdown
// races with a peer that disconnects meanwhile.
func stopBareRemote(system *actor.ActorSystem, r *paremote.Remote) {
	r.Shutdown(false)
	for _, name := range []string{"EndpointSupervisor", "activator"} {
		_ = system.Root.StopFuture(actor.NewPID(system.Address(), name)).Wait()
	}
	system.Shutdown()
}
