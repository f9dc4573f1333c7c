package tools

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// brittle stands in for a tool actor whose Logic fails on a call: it
// panics on a TOOL_CALL with id "boom", holds the calls whose id starts
// with "hold" until a call with id "release" on their stream, and answers
// the others at once. It has no failure handler: the calls open when it
// fails are the runtime's to answer.
type brittle struct{ held map[string][]*messages.Frame }

func (b *brittle) Receive(c actors.Context, msg any) {
	f, ok := msg.(*messages.Frame)
	if !ok || f.GetType() != messages.FrameType_TOOL_CALL {
		return
	}
	switch id := f.GetToolCallId(); {
	case id == "boom":
		panic("brittle tool")
	case strings.HasPrefix(id, "hold"):
		b.held[f.GetStreamId()] = append(b.held[f.GetStreamId()], f)
	default:
		if id == "release" {
			for _, h := range b.held[f.GetStreamId()] {
				answer(c, messages.RawToolResult(h.GetStreamId(), h.GetToolCallId(), h.GetName(), json.RawMessage(`"ok"`)))
			}
			delete(b.held, f.GetStreamId())
		}
		answer(c, messages.RawToolResult(f.GetStreamId(), id, f.GetName(), json.RawMessage(`"ok"`)))
	}
}

// brittleHost runs calls through a dispatcher whose one tool's actor is
// a brittle, supervised by the host's strategy.
type brittleHost struct{ d *dispatcher }

func (h *brittleHost) Start(c actors.WrapperContext) { spawnBrittle(c, h.d) }

// spawnBrittle starts a brittle as the actor of d's one tool.
func spawnBrittle(c actors.WrapperContext, d *dispatcher) {
	s := d.order[0]
	ref, err := c.Spawn(actors.Spec{Name: "tool-brittle", New: func() actors.Logic {
		return &brittle{held: map[string][]*messages.Frame{}}
	}})
	if err != nil {
		c.Fail(err)
	}
	s.ref, s.gone = ref, false
	d.byRef = map[string]*slot{ref.String(): s}
}

func (h *brittleHost) Request(c actors.WrapperContext, f *messages.Frame) {
	if f.GetType() == messages.FrameType_TOOL_CALL {
		h.d.run(c, f)
	}
}

func (h *brittleHost) Response(actors.WrapperContext, *messages.Frame) {}

func (h *brittleHost) HandleMessage(c actors.WrapperContext, msg any) { h.d.handle(c, msg) }

// brittleTool is the tool whose actor is a brittle: its handler never
// runs.
func brittleTool(t *testing.T) *Tool {
	return MustNew(Definition{Name: "brittle", Handler: func(context.Context, json.RawMessage) (any, error) {
		t.Error("the brittle tool's handler ran: its actor is the test's")
		return nil, nil
	}})
}

// startBrittle starts a brittleHost whose tool actor is supervised by
// opts (the breaker off: every call reaches the actor).
func startBrittle(t *testing.T, opts *supervisor.Options) *actors.Conn {
	return startBrittleBreaker(t, opts, BreakerOptions{Disabled: true})
}

// startBrittleBreaker is startBrittle with the breaker b.
func startBrittleBreaker(t *testing.T, opts *supervisor.Options, b BreakerOptions) *actors.Conn {
	t.Helper()
	tool := brittleTool(t)
	inner := actors.Duplex("none", func(*messages.Frame, func(*messages.Frame)) {})
	spec := actors.Wrap("host", inner, func() actors.Wrapped {
		h := &brittleHost{}
		h.d = newDispatcher([]*Tool{tool}, b, func(c actors.WrapperContext, _, result *messages.Frame) {
			c.ToOuter(result)
		})
		return h
	})
	return startSupervised(t, spec, opts)
}

// startSupervised starts spec, its children supervised by opts.
func startSupervised(t *testing.T, spec actors.Spec, opts *supervisor.Options) *actors.Conn {
	t.Helper()
	spec.Supervision = supervisor.MustNew(opts)
	rt := actorstest.NewRuntime(t, &actors.RuntimeOptions{})
	conn, err := rt.Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// results reads the host's frames until every id of want has a result,
// and returns each id's results (more than one is a call answered twice).
func results(t *testing.T, conn *actors.Conn, want ...string) map[string][]*messages.Frame {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := map[string][]*messages.Frame{}
	for missing := len(want); missing > 0; {
		f, err := conn.Recv(ctx)
		if err != nil {
			t.Fatalf("results: %v; got %v", err, got)
		}
		if f.GetType() != messages.FrameType_TOOL_RESULT {
			t.Fatalf("the host emitted %s; want only results", messages.Format(f))
		}
		id := f.GetToolCallId()
		got[id] = append(got[id], f)
		for _, w := range want {
			if w == id && len(got[id]) == 1 {
				missing--
			}
		}
	}
	return got
}

func send(t *testing.T, conn *actors.Conn, frames ...*messages.Frame) {
	t.Helper()
	if err := conn.SendAll(frames...); err != nil {
		t.Fatal(err)
	}
}

func brittleCall(stream, id string) *messages.Frame {
	return messages.ToolCall(stream, id, "brittle", json.RawMessage(`{}`))
}

// checkOnce checks that id was answered once, with an error of kind want
// ("" for a success).
func checkOnce(t *testing.T, got map[string][]*messages.Frame, id string, want FailureKind) {
	t.Helper()
	switch rs := got[id]; {
	case len(rs) != 1:
		t.Errorf("call %s has %d results, want 1: %v", id, len(rs), rs)
	case KindOf(rs[0]) != want:
		t.Errorf("call %s: result %s, want failure kind %q", id, messages.Format(rs[0]), want)
	}
}

// A tool actor resumed after its Logic failed on a call: the runtime
// answers that call with an ERROR of kind failed, which the dispatcher
// turns into the call's result; the other call of its stream, held by the
// Logic across the failure, gets the Logic's answer.
func TestDispatcher_AnswersCallOfResumedTool(t *testing.T) {
	conn := startBrittle(t, &supervisor.Options{Decider: func(error) supervisor.Directive { return supervisor.Resume }})
	send(t, conn, brittleCall("s1", "hold1"), brittleCall("s1", "boom"))
	got := results(t, conn, "boom")
	send(t, conn, brittleCall("s1", "release"))
	for id, rs := range results(t, conn, "hold1", "release") {
		got[id] = append(got[id], rs...)
	}
	checkOnce(t, got, "boom", actors.FailedKind)
	checkOnce(t, got, "hold1", "")
	checkOnce(t, got, "release", "")
	if text := string(got["boom"][0].GetPayload()); !strings.Contains(text, "brittle tool") {
		t.Errorf("boom's result %s does not say what failed", text)
	}
}

// A call the runtime answered for a resumed tool counts against the
// tool's breaker: its Logic failed on the call.
func TestDispatcher_CountsResumedCallAgainstTool(t *testing.T) {
	conn := startBrittleBreaker(t, &supervisor.Options{Decider: func(error) supervisor.Directive { return supervisor.Resume }},
		BreakerOptions{Failures: 1, Window: time.Hour, Cooldown: time.Hour})
	send(t, conn, brittleCall("s1", "boom"))
	got := results(t, conn, "boom")
	send(t, conn, brittleCall("s1", "next"))
	for id, rs := range results(t, conn, "next") {
		got[id] = append(got[id], rs...)
	}
	checkOnce(t, got, "boom", actors.FailedKind)
	checkOnce(t, got, "next", FailureUnavailable)
}

// A tool actor restarted after its Logic failed on a call, after a
// backoff: the runtime closes the calls open in the failed incarnation
// with ERROR and END (one without an id for the stream of several), which
// the dispatcher turns into their results, of kind stopped; a call sent
// meanwhile is run by the next incarnation.
func TestDispatcher_AnswersCallsOfRestartedTool(t *testing.T) {
	restart := make(chan struct{}, 1)
	conn := startBrittle(t, &supervisor.Options{MaxRestarts: 10, Within: time.Hour, InitialBackoff: 10 * time.Millisecond,
		Observer: func(e supervisor.Event) {
			if e.Directive == supervisor.Restart {
				restart <- struct{}{}
			}
		}})
	send(t, conn, brittleCall("s1", "hold1"), brittleCall("s1", "hold2"), brittleCall("s2", "boom"))
	<-restart
	send(t, conn, brittleCall("s3", "after"))
	got := results(t, conn, "hold1", "hold2", "boom", "after")
	checkOnce(t, got, "hold1", FailureStopped)
	checkOnce(t, got, "hold2", FailureStopped)
	checkOnce(t, got, "boom", FailureStopped)
	checkOnce(t, got, "after", "")
}

// A tool actor stopped by its supervisor: the runtime's ERROR of kind
// stopped answers its open calls, and its ChildStopped, coming after,
// gives them no second result.
func TestDispatcher_AnswersCallsOfStoppedToolOnce(t *testing.T) {
	conn := startBrittle(t, &supervisor.Options{MaxRestarts: supervisor.NoRestarts})
	send(t, conn, brittleCall("s1", "hold1"), brittleCall("s2", "boom"))
	got := results(t, conn, "hold1", "boom")
	// The tool is gone once its ChildStopped is handled; a call on the
	// stream of an answered one is answered after it.
	send(t, conn, brittleCall("s1", "late"))
	for id, rs := range results(t, conn, "late") {
		got[id] = append(got[id], rs...)
	}
	checkOnce(t, got, "hold1", FailureStopped)
	checkOnce(t, got, "boom", FailureStopped)
	if k := KindOf(got["late"][0]); k != FailureStopped && k != FailureUnavailable {
		t.Errorf("late call: %s, want stopped or unavailable", messages.Format(got["late"][0]))
	}
}

// brittleRouter is a router whose one tool's actor is a brittle.
type brittleRouter struct{ *routerLogic }

func (r brittleRouter) Start(c actors.WrapperContext) { spawnBrittle(c, r.d) }

// A router (async and streaming alike) gives its model, as the result of
// a call the runtime answered with an ERROR, an error result, once.
func TestRouter_GivesModelResultOfCallRuntimeAnswered(t *testing.T) {
	// The model calls brittle with the ids of a TEXT frame's words, and
	// tells each result it gets as a TEXT frame.
	model := actors.Duplex("model", func(f *messages.Frame, emit func(*messages.Frame)) {
		switch f.GetType() {
		case messages.FrameType_TEXT:
			for _, id := range strings.Fields(f.GetText()) {
				emit(brittleCall(f.GetStreamId(), id))
			}
		case messages.FrameType_TOOL_RESULT:
			emit(messages.Text(f.GetStreamId(), f.GetToolCallId()+" "+string(KindOf(f))))
		}
	})
	spec := actors.Wrap("router", model, func() actors.Wrapped {
		return brittleRouter{newRouterLogic([]*Tool{brittleTool(t)}, BreakerOptions{Disabled: true})}
	})
	conn := startSupervised(t, spec, &supervisor.Options{Decider: func(error) supervisor.Directive { return supervisor.Resume }})
	send(t, conn, messages.Text("s1", "hold1 boom"))
	send(t, conn, messages.Text("s1", "release"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	told := map[string]int{}
	for told["release "] == 0 {
		f, err := conn.Recv(ctx)
		if err != nil {
			t.Fatalf("the model was told %v: %v", told, err)
		}
		if f.GetType() == messages.FrameType_TEXT {
			told[f.GetText()]++
		}
	}
	want := map[string]int{"boom " + actors.FailedKind: 1, "hold1 ": 1, "release ": 1}
	if !maps.Equal(told, want) {
		t.Errorf("the model was told %v, want %v", told, want)
	}
}
