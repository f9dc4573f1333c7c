package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// noopSchema is used by the "validated" variants, whose calls carry
// arguments that must be decoded and checked.
var noopSchema = json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"},"n":{"type":"integer"}},"required":["name"]}`)

func noopTool(sync bool, schema json.RawMessage) *tools.Tool {
	return tools.MustNew(tools.Definition{Name: "noop", Sync: sync, Schema: schema,
		Handler: func(context.Context, json.RawMessage) (any, error) { return nil, nil }})
}

// toolBenchSession is one router around a ping model, driven one call at
// a time from outside.
type toolBenchSession struct {
	conn *actors.Conn
	st   *pingState
	goF  *messages.Frame
}

func newToolBenchSession(b *testing.B, rt *actors.Runtime, name string, sync, validated bool) *toolBenchSession {
	st := newPingState()
	schema, args := json.RawMessage(nil), json.RawMessage(`{}`)
	if validated {
		schema, args = noopSchema, json.RawMessage(`{"name":"Ada","n":3}`)
	}
	spec, err := tools.NewRouter(pingModel(st, messages.ToolCall("s", "c1", "noop", args)),
		&tools.RouterOptions{Name: name, Tools: []*tools.Tool{noopTool(sync, schema)}})
	if err != nil {
		b.Fatal(err)
	}
	conn, err := rt.Start(spec)
	if err != nil {
		b.Fatal(err)
	}
	return &toolBenchSession{conn: conn, st: st, goF: messages.Text("s", "go")}
}

// calls makes n calls, self-driven by the model once kicked.
func (s *toolBenchSession) calls(b *testing.B, n int) {
	s.st.run(n, func() {
		if err := s.conn.Send(s.goF); err != nil {
			b.Fatal(err)
		}
	})
}

// roundTrip: the model emits a TOOL_CALL, the router runs it, and the
// TOOL_RESULT reaches the model's sink.
func (s *toolBenchSession) roundTrip(b *testing.B) { s.calls(b, 1) }

func toolBenchRuntime(b *testing.B) *actors.Runtime {
	rt, err := actors.NewRuntime(runtimeOptions)
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

// Figure 2: the tool-call round trip, TOOL_CALL emitted by the model →
// TOOL_RESULT in the model's sink, self-driving: the model emits its next
// call as soon as it has the result of the last, b.N calls per run. The
// baseline is the same shape in bare protoactor: two actors playing
// request/respond ("ping-pong").

// pingState counts the calls a self-driving model still has to make and
// signals when they are done.
type pingState struct {
	left atomic.Int64
	done chan struct{}
}

func newPingState() *pingState { return &pingState{done: make(chan struct{}, 1)} }

// resulted counts one result; it reports whether another call is due.
func (st *pingState) resulted() bool {
	if st.left.Add(-1) > 0 {
		return true
	}
	st.done <- struct{}{}
	return false
}

// run makes n calls, started by sending kick, and waits for them.
func (st *pingState) run(n int, kick func()) {
	st.left.Store(int64(n))
	kick()
	<-st.done
}

// pingModel is a model adapter reduced to a self-driving tool caller: a
// TEXT in its sink starts it, each TOOL_RESULT makes it emit the next call.
func pingModel(st *pingState, call *messages.Frame) actors.Spec {
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
				if st.resulted() {
					c.Emit(call)
				}
			}
		})
	}}
}

// benchRouterPingPong measures the round trip through a router around
// pingModel with one no-op tool: Sync (run inline by the router: 2 hops)
// or async (on the tool actor, its handler on a goroutine); validated
// calls carry arguments checked against noopSchema.
func benchRouterPingPong(b *testing.B, sync, validated bool) {
	s := newToolBenchSession(b, toolBenchRuntime(b), "router", sync, validated)
	s.calls(b, 1) // the actors are up
	b.ReportAllocs()
	b.ResetTimer()
	s.calls(b, b.N)
	b.StopTimer()
}

// Bare protoactor ping-pong: the caller requests, the callee responds with
// a result frame built per call, as a tool does.
type (
	bareCaller struct {
		callee *actor.PID
		call   *messages.Frame
		st     *pingState
	}
	bareCallee struct{}
)

func (p *bareCaller) Receive(ctx actor.Context) {
	f, ok := ctx.Message().(*messages.Frame)
	if !ok {
		return
	}
	switch f.GetType() {
	case messages.FrameType_TEXT:
		ctx.Request(p.callee, p.call)
	case messages.FrameType_TOOL_RESULT:
		if p.st.resulted() {
			ctx.Request(p.callee, p.call)
		}
	}
}

func (bareCallee) Receive(ctx actor.Context) {
	if f, ok := ctx.Message().(*messages.Frame); ok && f.GetType() == messages.FrameType_TOOL_CALL {
		ctx.Respond(messages.RawToolResult(f.GetStreamId(), f.GetToolCallId(), f.GetName(), json.RawMessage(`{}`)))
	}
}

func benchBarePingPong(b *testing.B) {
	system := bareSystem(b)
	st := newPingState()
	callee := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return bareCallee{} }))
	c := &bareCaller{callee: callee, call: messages.ToolCall("s", "c1", "noop", json.RawMessage(`{}`)), st: st}
	caller := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return c }))
	goF := messages.Text("s", "go")
	kick := func() { system.Root.Send(caller, goF) }
	st.run(1, kick)
	b.ReportAllocs()
	b.ResetTimer()
	st.run(b.N, kick)
	b.StopTimer()
}

// benchRequestFuture is one bare protoactor RequestFuture per call, from
// outside any actor (information: it is what plain Go code calling an
// actor pays).
func benchRequestFuture(b *testing.B) {
	system := bareSystem(b)
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return bareResponder{} }))
	f := messages.ToolCall("s", "c1", "noop", json.RawMessage(`{}`))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := system.Root.RequestFuture(pid, f, 10*time.Second).Result(); err != nil {
			b.Fatal(err)
		}
	}
}

// benchBareSameHops is the topology of a router session (router, model and
// tool actors) in bare protoactor, driven from outside call by call.
func benchBareSameHops(b *testing.B) {
	system := bareSystem(b)
	router, done := bareSession(system)
	goF := messages.Text("s", "go")
	b.ReportAllocs()
	for b.Loop() {
		system.Root.Send(router, goF)
		<-done
	}
}

// benchToolDuplex calls the tool duplex alone through a Conn.
func benchToolDuplex(b *testing.B, sync bool) {
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
}

// benchRouterDriven is one call per Send through a router session, driven
// from outside (the older, externally driven round trip).
func benchRouterDriven(b *testing.B, sync, validated bool) {
	s := newToolBenchSession(b, toolBenchRuntime(b), "router", sync, validated)
	b.ReportAllocs()
	for b.Loop() {
		s.roundTrip(b)
	}
}

// parallelSessions is the session count of benchParallel.
const parallelSessions = 8

// benchParallel runs b.N calls spread over 8 concurrent sessions, calls
// one after the other within a session, and reports calls/s.
func benchParallel(b *testing.B, call func(i int)) {
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range parallelSessions {
		n := b.N / parallelSessions
		if i < b.N%parallelSessions {
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

func benchParallelRequestFuture(b *testing.B) {
	system := bareSystem(b)
	pids := make([]*actor.PID, parallelSessions)
	for i := range pids {
		pids[i] = system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return bareResponder{} }))
	}
	f := messages.ToolCall("s", "c1", "noop", json.RawMessage(`{}`))
	benchParallel(b, func(i int) {
		if _, err := system.Root.RequestFuture(pids[i], f, 10*time.Second).Result(); err != nil {
			b.Error(err)
		}
	})
}

func benchParallelBareSameHops(b *testing.B) {
	system := bareSystem(b)
	routers := make([]*actor.PID, parallelSessions)
	dones := make([]chan struct{}, parallelSessions)
	for i := range routers {
		routers[i], dones[i] = bareSession(system)
	}
	goF := messages.Text("s", "go")
	benchParallel(b, func(i int) {
		system.Root.Send(routers[i], goF)
		<-dones[i]
	})
}

func benchParallelRouters(b *testing.B, sync bool) {
	rt := toolBenchRuntime(b)
	ss := make([]*toolBenchSession, parallelSessions)
	for i := range ss {
		ss[i] = newToolBenchSession(b, rt, fmt.Sprintf("router%d", i), sync, false)
	}
	benchParallel(b, func(i int) { ss[i].roundTrip(b) })
}
