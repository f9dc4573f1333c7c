package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/tools/tooltest"
)

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func isEnd(f *messages.Frame) bool { return f.GetType() == messages.FrameType_END }

// TestRouter_SyncDispatch: the seed's sync router with a name → handler
// map. The call is answered into the model's sink and dropped from the
// outgoing stream; other frames pass unchanged.
func TestRouter_SyncDispatch(t *testing.T) {
	rt := newRuntime(t)
	model := newSink()
	spec, err := tools.NewRouter(tooltest.ScriptedModel("model", [][]*messages.Frame{{
		messages.Text("", "calling"),
		messages.ToolCall("", "c1", "greet", raw(`{"name":"Ada"}`)),
		messages.ToolCall("", "c2", "nope", raw(`{}`)),
		messages.Meta("", "usage", raw(`{"tokens":3}`)),
		messages.End(""),
	}}, model.observe), &tools.RouterOptions{Handlers: map[string]tools.HandlerFunc{"greet": greet}})
	if err != nil {
		t.Fatal(err)
	}
	conn := start(t, rt, spec)
	if err := conn.SendAll(messages.RawParam("s", "messages", raw(`[]`)), messages.End("s")); err != nil {
		t.Fatal(err)
	}
	out, err := conn.RecvStream(testCtx(t), "s")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{`TEXT stream=s text="calling"`, `META stream=s name=usage payload={"tokens":3}`, `END stream=s`}; !slices.Equal(lines(out), want) {
		t.Fatalf("outer got %q, want %q", lines(out), want)
	}
	results := lines(model.results(t, 2))
	sort.Strings(results)
	want := []string{
		`TOOL_RESULT stream=s id=c1 name=greet payload={"greeting":"Hello, Ada"}`,
		`TOOL_RESULT stream=s id=c2 name=nope is_error failure_kind=unknown_tool payload={"success":false,"error":"Unknown tool: nope"}`,
	}
	if !slices.Equal(results, want) {
		t.Fatalf("model got %q, want %q", results, want)
	}
}

// TestAsyncRouter_ParallelCalls: two calls of one response run at the
// same time (each waits for the other to start), so neither blocks the
// router or the tool actor.
func TestAsyncRouter_ParallelCalls(t *testing.T) {
	rt := newRuntime(t)
	model := newSink()
	var started atomic.Int32
	both := make(chan struct{})
	handler := func(ctx context.Context, args json.RawMessage) (any, error) {
		if started.Add(1) == 2 {
			close(both)
		}
		select {
		case <-both:
			return "together", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	spec, err := tools.NewAsyncRouter(tooltest.ScriptedModel("model", [][]*messages.Frame{{
		messages.ToolCall("", "c1", "meet", nil),
		messages.ToolCall("", "c2", "meet", nil),
		messages.End(""),
	}}, model.observe), &tools.RouterOptions{Handlers: map[string]tools.HandlerFunc{"meet": handler}})
	if err != nil {
		t.Fatal(err)
	}
	conn := start(t, rt, spec)
	if err := conn.Send(messages.End("s")); err != nil {
		t.Fatal(err)
	}
	for _, r := range model.results(t, 2) {
		if string(r.GetPayload()) != `"together"` {
			t.Fatalf("result %q", line(r))
		}
	}
}

// TestRouter_PanicAndCancel: a tool that panics answers with an error and
// is restarted; the router keeps serving; a CANCEL from the consumer
// cancels the stream's running call.
func TestRouter_PanicAndCancel(t *testing.T) {
	rt := newRuntime(t)
	model := newSink()
	script := [][]*messages.Frame{
		{messages.ToolCall("", "c1", "risky", raw(`{"panic":true}`)), messages.End("")},
		{messages.ToolCall("", "c2", "risky", raw(`{}`)), messages.End("")},
		{messages.ToolCall("", "c3", "risky", raw(`{"block":true}`)), messages.End("")},
	}
	spec, err := tools.NewAsyncRouter(tooltest.ScriptedModel("model", script, model.observe), &tools.RouterOptions{
		Handlers: map[string]tools.HandlerFunc{"risky": func(ctx context.Context, args json.RawMessage) (any, error) {
			var in struct{ Panic, Block bool }
			_ = json.Unmarshal(args, &in)
			if in.Panic {
				panic("kaboom")
			}
			if in.Block {
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return "fine", nil
		}}})
	if err != nil {
		t.Fatal(err)
	}
	conn := start(t, rt, spec)
	want := []string{
		`TOOL_RESULT stream=s id=c1 name=risky is_error failure_kind=panic payload={"success":false,"error":"Tool risky panicked: kaboom"}`,
		`TOOL_RESULT stream=s id=c2 name=risky payload="fine"`,
		`TOOL_RESULT stream=s id=c3 name=risky is_error failure_kind=cancelled payload={"success":false,"error":"Tool call cancelled"}`,
	}
	for i, w := range want {
		if err := conn.Send(messages.End("s")); err != nil {
			t.Fatal(err)
		}
		// The response's END reaches the consumer after its call was
		// dispatched.
		if _, err := conn.RecvStream(testCtx(t), "s"); err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			if err := conn.Send(messages.Cancel("s", "c3")); err != nil {
				t.Fatal(err)
			}
		}
		if got := line(model.results(t, 1)[0]); got != w {
			t.Fatalf("round %d: got %s, want %s", i, got, w)
		}
	}
}

// routerStep drives a router's logic with a Recorder, as the actor would.
type routerStep struct {
	t     *testing.T
	r     actorstest.Recorder
	l     actors.Logic
	inner actors.Ref
	tool  actors.Ref
}

func newRouterStep(t *testing.T, opts *tools.RouterOptions) *routerStep {
	spec, err := tools.NewAsyncRouter(tooltest.ScriptedModel("model", nil, nil), opts)
	if err != nil {
		t.Fatal(err)
	}
	s := &routerStep{t: t, l: spec.New(), inner: actorstest.ChildRef(1), tool: actorstest.ChildRef(2)}
	s.deliver(actors.Started{})
	if len(s.r.Spawned) != 2 || s.r.Spawned[1].Name != "tool-flaky" {
		t.Fatalf("spawned %d children", len(s.r.Spawned))
	}
	return s
}

func (s *routerStep) deliver(msg any) {
	s.t.Helper()
	if err := s.r.Deliver(s.l, msg); err != nil {
		s.t.Fatal(err)
	}
}

// call makes the model call id and returns where the call went: "tool",
// or the result sent into the model.
func (s *routerStep) call(id string) string {
	s.t.Helper()
	s.r.Sent = nil
	s.deliver(actors.ChildFrame{Child: s.inner, Frame: messages.ToolCall("s", id, "flaky", nil)})
	if len(s.r.Sent) != 1 {
		s.t.Fatalf("call %s: sent %d frames", id, len(s.r.Sent))
	}
	if s.r.Sent[0].To.Equal(s.tool) {
		return "tool"
	}
	return string(tools.KindOf(s.r.Sent[0].Frame))
}

func (s *routerStep) toolAnswers(id string, failed bool) {
	s.t.Helper()
	res := messages.RawToolResult("s", id, "flaky", raw(`{}`))
	if failed {
		res = messages.ToolError("s", id, "flaky", "boom")
	}
	s.deliver(actors.ChildFrame{Child: s.tool, Frame: res})
	s.deliver(actors.ChildFrame{Child: s.tool, Frame: messages.End("s")})
}

// TestRouter_CircuitBreaker drives the breaker through the router's logic:
// two failures open it, calls are then answered "unavailable" without
// reaching the tool, and after the cool-down a trial call runs. OnChange
// is told each change of state, once.
func TestRouter_CircuitBreaker(t *testing.T) {
	var changes []string
	s := newRouterStep(t, &tools.RouterOptions{
		Handlers: map[string]tools.HandlerFunc{"flaky": greet},
		Breaker: tools.BreakerOptions{Failures: 2, OnChange: func(tool string, state tools.BreakerState) {
			changes = append(changes, tool+" "+state.String())
		}},
	})
	for _, id := range []string{"c1", "c2"} {
		if got := s.call(id); got != "tool" {
			t.Fatalf("%s went to %s", id, got)
		}
		s.toolAnswers(id, true)
	}
	if got := s.call("c3"); got != string(tools.FailureUnavailable) {
		t.Fatalf("with the breaker open c3 got %s", got)
	}
	var cooled any
	for _, tm := range s.r.Timers {
		if tm.D == tools.DefaultBreakerCooldown {
			cooled = tm.Key
		}
	}
	if cooled == nil {
		t.Fatalf("no cool-down timer in %v", s.r.Timers)
	}
	s.deliver(actors.Timer{Key: cooled})
	if got := s.call("c4"); got != "tool" {
		t.Fatalf("after the cool-down the trial call went to %s", got)
	}
	if got := s.call("c5"); got != string(tools.FailureUnavailable) {
		t.Fatalf("a second call during the trial got %s", got)
	}
	s.toolAnswers("c4", false)
	if got := s.call("c6"); got != "tool" {
		t.Fatalf("after a good trial c6 went to %s", got)
	}
	s.toolAnswers("c6", false)
	if want := "flaky open, flaky half-open, flaky closed"; strings.Join(changes, ", ") != want {
		t.Errorf("breaker changes %q, want %q", changes, want)
	}
	// A result for an answered call is never delivered again.
	s.r.Sent = nil
	s.toolAnswers("c4", false)
	if len(s.r.Sent) != 0 {
		t.Fatalf("duplicate result delivered: %v", s.r.Sent)
	}
}

// TestRouter_BreakerIgnoresBadCalls: failures that say the call was wrong
// (invalid arguments, something it names not found, cancelled) do not
// open the breaker, however many there are; one handler error does.
func TestRouter_BreakerIgnoresBadCalls(t *testing.T) {
	s := newRouterStep(t, &tools.RouterOptions{
		Handlers: map[string]tools.HandlerFunc{"flaky": greet},
		Breaker:  tools.BreakerOptions{Failures: 1},
	})
	for i, kind := range []tools.FailureKind{tools.FailureInvalidArguments, tools.FailureNotFound, tools.FailureCancelled,
		tools.FailureNotFound, tools.FailureHandler} {
		id := fmt.Sprintf("c%d", i)
		if got := s.call(id); got != "tool" {
			t.Fatalf("%s, after calls answered %s: went to %s", id, kind, got)
		}
		res := messages.ToolError("s", id, "flaky", "no")
		res.Meta.FailureKind = string(kind)
		s.deliver(actors.ChildFrame{Child: s.tool, Frame: res})
		s.deliver(actors.ChildFrame{Child: s.tool, Frame: messages.End("s")})
	}
	if got := s.call("last"); got != string(tools.FailureUnavailable) {
		t.Fatalf("after a handler error with a threshold of 1 the call went to %s", got)
	}
}

// TestRouter_ToolStoppedForGood: when the supervisor gives up on a tool,
// its outstanding call is answered and later calls are refused.
func TestRouter_ToolStoppedForGood(t *testing.T) {
	s := newRouterStep(t, &tools.RouterOptions{Handlers: map[string]tools.HandlerFunc{"flaky": greet}})
	if got := s.call("c1"); got != "tool" {
		t.Fatal(got)
	}
	s.r.Sent = nil
	s.deliver(actors.ChildStopped{Child: s.tool})
	if len(s.r.Sent) != 1 || tools.KindOf(s.r.Sent[0].Frame) != tools.FailureStopped {
		t.Fatalf("outstanding call answered with %v", s.r.Sent)
	}
	if got := s.call("c2"); got != string(tools.FailureUnavailable) {
		t.Fatalf("call to a stopped tool got %s", got)
	}
}

// TestStreamingRouter_Golden runs interleaved streaming calls, a call with
// invalid JSON, an unknown tool and a call cut off by the end of the
// stream through the streaming router and records the frames.
func TestStreamingRouter_Golden(t *testing.T) {
	rt := newRuntime(t)
	model := newSink()
	response := []*messages.Frame{
		messages.Text("", "Reading both files."),
		messages.StreamingToolCall("", "call_a", "read_file"),
		messages.StreamingToolCall("", "call_b", "read_file"),
		messages.ToolArgChunk("", "call_b", `{"path":`),
		messages.ToolArgChunk("", "call_a", `{"pa`),
		messages.ToolArgChunk("", "call_a", `th":"a.txt"}`),
		messages.ToolArgChunk("", "call_b", `"b.txt"}`),
		messages.ToolComplete("", "call_b"),
		messages.ToolComplete("", "call_a"),
		messages.StreamingToolCall("", "call_bad", "read_file"),
		messages.ToolArgChunk("", "call_bad", `{"path":"c.txt"`),
		messages.ToolArgChunk("", "call_bad", `,}`),
		messages.ToolComplete("", "call_bad"),
		messages.ToolCall("", "call_x", "delete_everything", raw(`{}`)),
		messages.StreamingToolCall("", "call_cut", "read_file"),
		messages.ToolArgChunk("", "call_cut", `{"path":"d.t`),
		messages.Meta("", "usage", raw(`{"completion_tokens":42}`)),
		messages.End(""),
	}
	readFile := tools.MustNewTyped(tools.Definition{Name: "read_file"},
		func(ctx context.Context, in struct {
			Path string `json:"path"`
		}) (map[string]string, error) {
			return map[string]string{"content": "contents of " + in.Path}, nil
		})
	spec, err := tools.NewStreamingRouter(tooltest.ScriptedModel("model", [][]*messages.Frame{response}, model.observe),
		&tools.RouterOptions{Tools: []*tools.Tool{readFile}})
	if err != nil {
		t.Fatal(err)
	}
	conn := start(t, rt, spec)
	in := []*messages.Frame{messages.RawParam("s1", "messages", raw(`[{"role":"user","content":"read a.txt and b.txt"}]`)), messages.End("s1")}
	if err := conn.SendAll(in...); err != nil {
		t.Fatal(err)
	}
	out, err := conn.RecvStream(testCtx(t), "s1")
	if err != nil {
		t.Fatal(err)
	}
	request := model.until(t, isEnd)
	results := model.results(t, 5)
	sort.Slice(results, func(i, j int) bool { return results[i].GetToolCallId() < results[j].GetToolCallId() })
	var tr transcript
	tr.section("consumer -> router", in)
	tr.section("router -> model (request)", request)
	tr.section("model -> router (response)", response)
	tr.section("router -> model (tool results, sorted by id)", results)
	tr.section("router -> consumer", out)
	tr.check(t, "streaming_router")
	if strings.Contains(tr.b.String(), "panic") {
		t.Error("a malformed call made something panic")
	}
}

func TestRouterOptions_Invalid(t *testing.T) {
	dup := tools.MustNew(tools.Definition{Name: "greet"})
	_, err := tools.NewRouter(tooltest.ScriptedModel("m", nil, nil), &tools.RouterOptions{
		Tools: []*tools.Tool{dup}, Handlers: map[string]tools.HandlerFunc{"greet": greet}})
	if err == nil {
		t.Error("a tool given twice was accepted")
	}
	_, err = tools.NewRouter(tooltest.ScriptedModel("m", nil, nil), &tools.RouterOptions{Breaker: tools.BreakerOptions{Window: -1}})
	if err == nil {
		t.Error("a negative breaker window was accepted")
	}
	if _, err := tools.NewLoop(tooltest.ScriptedModel("m", nil, nil), &tools.LoopOptions{MaxIterations: -1}); err == nil {
		t.Error("negative max iterations accepted")
	}
}

// TestRouter_SyncToolsRunInline: the sync router runs map handlers in its
// own turn. A panic is answered "panicked" and the router keeps serving;
// repeated failures open the circuit breaker.
func TestRouter_SyncToolsRunInline(t *testing.T) {
	rt := newRuntime(t)
	model := newSink()
	var calls atomic.Int32
	script := [][]*messages.Frame{
		{messages.ToolCall("", "c1", "flaky", raw(`{"panic":true}`)), messages.End("")},
		{messages.ToolCall("", "c2", "flaky", raw(`{}`)), messages.End("")},
		{messages.ToolCall("", "c3", "flaky", raw(`{"panic":true}`)), messages.End("")},
		{messages.ToolCall("", "c4", "flaky", raw(`{}`)), messages.End("")},
	}
	spec, err := tools.NewRouter(tooltest.ScriptedModel("model", script, model.observe), &tools.RouterOptions{
		Breaker: tools.BreakerOptions{Failures: 2, Window: time.Hour, Cooldown: time.Hour},
		Handlers: map[string]tools.HandlerFunc{"flaky": func(ctx context.Context, args json.RawMessage) (any, error) {
			calls.Add(1)
			var in struct{ Panic bool }
			_ = json.Unmarshal(args, &in)
			if in.Panic {
				panic("flaky fell over")
			}
			return "fine", nil
		}}})
	if err != nil {
		t.Fatal(err)
	}
	conn := start(t, rt, spec)
	want := []string{
		`TOOL_RESULT stream=s id=c1 name=flaky is_error failure_kind=panic payload={"success":false,"error":"Tool flaky panicked: flaky fell over"}`,
		`TOOL_RESULT stream=s id=c2 name=flaky payload="fine"`,
		`TOOL_RESULT stream=s id=c3 name=flaky is_error failure_kind=panic payload={"success":false,"error":"Tool flaky panicked: flaky fell over"}`,
		`TOOL_RESULT stream=s id=c4 name=flaky is_error failure_kind=unavailable payload={"success":false,"error":"Tool flaky is temporarily unavailable: it failed 2 times within 1h0m0s; answer without it or try again later"}`,
	}
	for i, w := range want {
		if err := conn.SendAll(messages.End("s")); err != nil {
			t.Fatal(err)
		}
		if got := line(model.results(t, 1)[0]); got != w {
			t.Fatalf("call %d:\n got %s\nwant %s", i+1, got, w)
		}
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("handler ran %d times, want 3 (the breaker refuses the 4th call)", n)
	}
}
