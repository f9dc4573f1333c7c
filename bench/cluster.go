package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

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
	rb := &remoteBench{}
	defer rb.stop()
	two, one := &clusterBench{pg: pg, members: 2}, &clusterBench{pg: pg, members: 1}
	defer two.stop()
	defer one.stop()
	streams, sessions := 64, 64
	if c.smoke {
		streams, sessions = 2, 2
	}
	chunks := func(name string, open storeOpener, sessions int) side {
		return metricSide(name, "chunks/s", func(b *testing.B) { benchRouterChunksOn(b, open, sessions) })
	}
	return c.rows([]pair{
		{figure: "8", name: "remote tool call round trip, loopback", ours: benchSide("remote tool", rb.benchToolCall),
			base: benchSide("protoactor remote request/response", rb.benchBareRequest),
			kind: duration, unit: "call", goal: ratioAtMost(1.5)},
		{figure: "8", name: fmt.Sprintf("router chunks/s, PostgreSQL, %d streams", streams), ours: chunks("PostgreSQL", pg.open, streams),
			base: chunks("bbolt", openBolt(nil), streams), kind: throughput, unit: "chunks", goal: oursAtLeast(50_000, "≥ 50 000/s"),
			note: "both fsync every commit: on a machine whose fsync is slow both are bounded by it; the ratio is the comparable figure"},
		{figure: "8", name: "router recovery of 10 000 pending calls (PostgreSQL)",
			ours: benchSide("router", func(b *testing.B) { benchRouterRecoveryOn(b, pg.open) }),
			kind: duration, unit: "recovery", goal: oursAtMost(500_000, "< 500 ms")},
		{figure: "8", name: fmt.Sprintf("sessions/s, %d sessions on 2 cluster members vs 1", sessions),
			ours: benchSide("2 members", func(b *testing.B) { two.benchSessions(b, sessions) }),
			base: benchSide("1 member", func(b *testing.B) { one.benchSessions(b, sessions) }),
			kind: throughput, unit: "sessions", per: float64(sessions), goal: info,
			note: fmt.Sprintf("members are processes on this machine, sharing its cores and one PostgreSQL server; each session makes %d tool rounds (a SHA-256 of 256 KiB each), persisted step by step", clusterRounds)},
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

// dsn starts the server if need be and returns its connection string.
func (p *pgServer) dsn() (string, error) {
	// Members of the cluster rows hold connections besides the stores'.
	p.once.Do(func() {
		p.srv, p.err = pgtest.Start(&pgtest.Options{Fsync: p.fsync, Settings: map[string]string{"max_connections": "300"}})
	})
	if p.err != nil {
		return "", p.err
	}
	return p.srv.DSN, nil
}

// open is a storeOpener: a store in a fresh schema of the server.
func (p *pgServer) open(b *testing.B) durability.Store {
	if _, err := p.dsn(); err != nil {
		b.Fatal(err)
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

// envPeer makes this binary the far side of the round trips: a node
// serving a no-op tool, whose actor system also runs a bare protoactor
// responder. It prints its address and serves until its stdin closes.
const envPeer = "POLYWEAVE_BENCH_PEER"

// bareResponderName is the peer's bare responder actor.
const bareResponderName = "responder"

// servePeer runs this process as the peer if envPeer says so, and reports
// whether it did (main then returns).
func servePeer() bool {
	if spec := os.Getenv(envMember); spec != "" { // a member of a benchmark cluster
		serveMember(spec)
		return true
	}
	if os.Getenv(envPeer) == "" {
		return false
	}
	node, err := remote.Serve(&remote.NodeOptions{Tools: []*tools.Tool{tools.MustNew(tools.Definition{Name: "noop", Sync: true})}})
	if err == nil {
		_, err = node.System().Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return bareResponder{} }), bareResponderName)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench peer:", err)
		os.Exit(1)
	}
	fmt.Println(node.Address())
	_, _ = io.Copy(io.Discard, os.Stdin)
	node.Close(context.Background())
	return true
}

// remoteBench is the fixture of the round trips: the peer process and one
// client, started on first use. The bare baseline sends from the client's
// actor system: a process runs one protoactor remote (two race on gRPC's
// global logger).
type remoteBench struct {
	once   sync.Once
	err    error
	addr   string
	cmd    *exec.Cmd
	stdin  io.Closer
	client *remote.Client
}

func (rb *remoteBench) start(b *testing.B) {
	rb.once.Do(func() {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envPeer+"=1")
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			rb.err = err
			return
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			rb.err = err
			return
		}
		if err := cmd.Start(); err != nil {
			rb.err = err
			return
		}
		rb.cmd, rb.stdin = cmd, stdin
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			rb.err = fmt.Errorf("bench peer: %w", err)
			return
		}
		rb.addr = strings.TrimSpace(line)
		rb.client, rb.err = remote.NewClient(nil)
	})
	if rb.err != nil {
		b.Fatal(rb.err)
	}
}

func (rb *remoteBench) stop() {
	if rb.client != nil {
		rb.client.Close(context.Background())
	}
	if rb.cmd != nil {
		rb.stdin.Close()
		done := make(chan struct{})
		go func() { rb.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			rb.cmd.Process.Kill()
			<-done
		}
	}
}

// benchToolCall is one call of a remote no-op tool: TOOL_CALL into the
// host's tool duplex, whose handler sends it to the node over loopback
// gRPC, where the node's tool duplex runs it; the TOOL_RESULT comes back
// to the host's duplex, which emits it (and END).
func (rb *remoteBench) benchToolCall(b *testing.B) {
	rb.start(b)
	rt, err := actors.NewRuntime(nil)
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ts, err := rb.client.Tools(ctx, rb.addr)
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

// benchBareRequest is one protoactor RequestFuture to an actor in the peer
// process over loopback gRPC, answered with a frame.
func (rb *remoteBench) benchBareRequest(b *testing.B) {
	rb.start(b)
	system := rb.client.System()
	pid := actor.NewPID(rb.addr, bareResponderName)
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
