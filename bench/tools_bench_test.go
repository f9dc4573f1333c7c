package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// toolBenchModel is a model adapter reduced to what a round trip needs:
// a TEXT "go" in its sink makes it emit a TOOL_CALL for the no-op tool, and
// a TOOL_RESULT in its sink is reported on done.
func toolBenchModel(done chan<- struct{}, args json.RawMessage) actors.Spec {
	call := messages.ToolCall("s", "c1", "noop", args)
	return actors.Spec{Name: "model", New: func() actors.Logic {
		return actors.LogicFunc(func(c actors.Context, msg any) {
			f, ok := msg.(*messages.Frame)
			if !ok {
				return
			}
			switch f.GetType() {
			case messages.FrameType_TEXT:
				c.Emit(call)
			case messages.FrameType_TOOL_RESULT:
				done <- struct{}{}
			}
		})
	}}
}

// noopSchema is used by the "validated" variants, whose calls carry
// arguments that must be decoded and checked.
var noopSchema = json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"},"n":{"type":"integer"}},"required":["name"]}`)

func noopTool(sync bool, schema json.RawMessage) *tools.Tool {
	return tools.MustNew(tools.Definition{Name: "noop", Sync: sync, Schema: schema,
		Handler: func(context.Context, json.RawMessage) (any, error) { return nil, nil }})
}

// toolBenchSession is one router around a bench model, ready for round trips.
type toolBenchSession struct {
	conn *actors.Conn
	done chan struct{}
	goF  *messages.Frame
}

func newToolBenchSession(b *testing.B, rt *actors.Runtime, name string, sync, validated bool) *toolBenchSession {
	done := make(chan struct{}, 1)
	schema, args := json.RawMessage(nil), json.RawMessage(`{}`)
	if validated {
		schema, args = noopSchema, json.RawMessage(`{"name":"Ada","n":3}`)
	}
	spec, err := tools.NewRouter(toolBenchModel(done, args), &tools.RouterOptions{Name: name, Tools: []*tools.Tool{noopTool(sync, schema)}})
	if err != nil {
		b.Fatal(err)
	}
	conn, err := rt.Start(spec)
	if err != nil {
		b.Fatal(err)
	}
	return &toolBenchSession{conn: conn, done: done, goF: messages.Text("s", "go")}
}

// roundTrip: the model emits a TOOL_CALL, the router runs it on the tool
// actor, and the TOOL_RESULT reaches the model's sink.
func (s *toolBenchSession) roundTrip(b *testing.B) {
	if err := s.conn.Send(s.goF); err != nil {
		b.Fatal(err)
	}
	<-s.done
}

func toolBenchRuntime(b *testing.B) *actors.Runtime {
	rt, err := actors.NewRuntime(nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rt.Close(ctx)
	})
	return rt
}

// bareResponder answers every request with the message itself.
type bareResponder struct{}

func (bareResponder) Receive(ctx actor.Context) {
	if f, ok := ctx.Message().(*messages.Frame); ok {
		ctx.Respond(f)
	}
}

// The same topology as a router session in bare protoactor: a router
// actor owning a model actor and a tool actor. "go" makes the model send a
// call to the router, the router sends it to the tool, the tool answers
// with a result and an end, the router writes the result to the model.
type (
	bareRouter struct{ model, tool *actor.PID }
	bareModel  struct {
		router *actor.PID
		call   *messages.Frame
		done   chan<- struct{}
	}
	bareTool struct{}
)

func (r *bareRouter) Receive(ctx actor.Context) {
	f, ok := ctx.Message().(*messages.Frame)
	if !ok {
		return
	}
	switch {
	case f.GetType() == messages.FrameType_TEXT:
		ctx.Request(r.model, f)
	case f.GetType() == messages.FrameType_TOOL_CALL:
		ctx.Request(r.tool, f)
	case f.GetType() == messages.FrameType_TOOL_RESULT:
		ctx.Request(r.model, f)
	}
}

func (m *bareModel) Receive(ctx actor.Context) {
	if f, ok := ctx.Message().(*messages.Frame); ok {
		switch f.GetType() {
		case messages.FrameType_TEXT:
			ctx.Request(m.router, m.call)
		case messages.FrameType_TOOL_RESULT:
			m.done <- struct{}{}
		}
	}
}

func (bareTool) Receive(ctx actor.Context) {
	if f, ok := ctx.Message().(*messages.Frame); ok && f.GetType() == messages.FrameType_TOOL_CALL {
		ctx.Request(ctx.Sender(), messages.RawToolResult(f.GetStreamId(), f.GetToolCallId(), f.GetName(), json.RawMessage(`{}`)))
		ctx.Request(ctx.Sender(), messages.End(f.GetStreamId()))
	}
}

// bareSession spawns the bare topology and returns the router's PID and
// the channel the model reports results on.
func bareSession(system *actor.ActorSystem) (*actor.PID, chan struct{}) {
	done := make(chan struct{}, 1)
	r := &bareRouter{}
	m := &bareModel{call: messages.ToolCall("s", "c1", "noop", json.RawMessage(`{}`)), done: done}
	r.tool = system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return bareTool{} }))
	r.model = system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return m }))
	router := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return r }))
	m.router = router
	return router, done
}

func bareSystem(b *testing.B) *actor.ActorSystem {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	b.Cleanup(system.Shutdown)
	return system
}

// BenchmarkToolCallRoundTrip measures one tool call, TOOL_CALL emitted by
// the model → TOOL_RESULT in the model's sink, through a router with a
// no-op tool (sync: run in the tool actor's turn; async: on a goroutine of
// its own; "router-validated" with arguments checked against a schema),
// against a bare protoactor request/respond of one frame
// ("protoactor"), against the same actor topology and message count in
// bare protoactor ("protoactor-same-hops"), and the tool duplex alone,
// called through a Conn ("tool-duplex"). Report router/protoactor and
// router/protoactor-same-hops as the ratios.
func BenchmarkToolCallRoundTrip(b *testing.B) {
	b.Run("protoactor", func(b *testing.B) {
		system := bareSystem(b)
		pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return bareResponder{} }))
		f := messages.ToolCall("s", "c1", "noop", json.RawMessage(`{}`))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := system.Root.RequestFuture(pid, f, 10*time.Second).Result(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("protoactor-same-hops", func(b *testing.B) {
		system := bareSystem(b)
		router, done := bareSession(system)
		goF := messages.Text("s", "go")
		b.ReportAllocs()
		for b.Loop() {
			system.Root.Send(router, goF)
			<-done
		}
	})
	for _, sync := range []bool{true, false} {
		mode := map[bool]string{true: "sync", false: "async"}[sync]
		b.Run("tool-duplex/"+mode, func(b *testing.B) {
			rt := toolBenchRuntime(b)
			conn, err := rt.Start(noopTool(sync, nil).Spec())
			if err != nil {
				b.Fatal(err)
			}
			f := messages.ToolCall("s", "c1", "noop", json.RawMessage(`{}`))
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := conn.Send(f); err != nil {
					b.Fatal(err)
				}
				for range 2 { // TOOL_RESULT, END
					if _, err := conn.Recv(ctx); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		b.Run("router/"+mode, func(b *testing.B) {
			s := newToolBenchSession(b, toolBenchRuntime(b), "router", sync, false)
			b.ReportAllocs()
			for b.Loop() {
				s.roundTrip(b)
			}
		})
		b.Run("router-validated/"+mode, func(b *testing.B) {
			s := newToolBenchSession(b, toolBenchRuntime(b), "router", sync, true)
			b.ReportAllocs()
			for b.Loop() {
				s.roundTrip(b)
			}
		})
	}
}

// BenchmarkToolCallParallel measures tool-call throughput with 8
// concurrent sessions (a router and model each), calls one after the other
// within a session, against 8 concurrent bare protoactor request/respond
// loops and 8 bare sessions of the same topology. Report calls/s of
// router over each baseline.
func BenchmarkToolCallParallel(b *testing.B) {
	const sessions = 8
	run := func(b *testing.B, call func(i int)) {
		b.ReportAllocs()
		b.ResetTimer()
		var wg sync.WaitGroup
		for i := range sessions {
			n := b.N / sessions
			if i < b.N%sessions {
				n++
			}
			wg.Go(func() {
				for range n {
					call(i)
				}
			})
		}
		wg.Wait()
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
	}
	b.Run("protoactor", func(b *testing.B) {
		system := bareSystem(b)
		pids := make([]*actor.PID, sessions)
		for i := range pids {
			pids[i] = system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return bareResponder{} }))
		}
		f := messages.ToolCall("s", "c1", "noop", json.RawMessage(`{}`))
		run(b, func(i int) {
			if _, err := system.Root.RequestFuture(pids[i], f, 10*time.Second).Result(); err != nil {
				b.Error(err)
			}
		})
	})
	b.Run("protoactor-same-hops", func(b *testing.B) {
		system := bareSystem(b)
		routers := make([]*actor.PID, sessions)
		dones := make([]chan struct{}, sessions)
		for i := range routers {
			routers[i], dones[i] = bareSession(system)
		}
		goF := messages.Text("s", "go")
		run(b, func(i int) {
			system.Root.Send(routers[i], goF)
			<-dones[i]
		})
	})
	for _, sync := range []bool{true, false} {
		mode := map[bool]string{true: "sync", false: "async"}[sync]
		b.Run("router/"+mode, func(b *testing.B) {
			rt := toolBenchRuntime(b)
			ss := make([]*toolBenchSession, sessions)
			for i := range ss {
				ss[i] = newToolBenchSession(b, rt, fmt.Sprintf("router%d", i), sync, false)
			}
			run(b, func(i int) { ss[i].roundTrip(b) })
		})
	}
}
