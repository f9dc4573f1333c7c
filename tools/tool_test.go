package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

var greetSchema = json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)

func greet(ctx context.Context, args json.RawMessage) (any, error) {
	var in struct{ Name string }
	if err := json.Unmarshal(args, &in); err != nil {
		return nil, err
	}
	return map[string]string{"greeting": "Hello, " + in.Name}, nil
}

func TestNew_Defaults(t *testing.T) {
	tool := tools.MustNew(tools.Definition{})
	d := tool.Description()
	if d.Name != "unnamed" || d.Description != "Tool: unnamed" || !slices.Equal(d.Capabilities, []string{"read"}) ||
		d.Transactional || !d.Reversible || d.TimeoutMs != 30000 || d.Sync {
		t.Fatalf("defaults: %+v", d)
	}
	if string(d.Schema) != `{"type":"object","properties":{},"required":[]}` {
		t.Fatalf("default schema %s", d.Schema)
	}
	if tools.MustNew(tools.Definition{Timeout: tools.NoTimeout}).Description().TimeoutMs != 0 {
		t.Error("NoTimeout should report timeoutMs 0")
	}
	if _, err := tools.New(tools.Definition{Schema: json.RawMessage(`{"type":`)}); !errors.Is(err, tools.ErrInvalidDefinition) {
		t.Errorf("broken schema: %v, want ErrInvalidDefinition", err)
	}
	if _, err := tools.New(tools.Definition{Name: "a/b"}); !errors.Is(err, tools.ErrInvalidDefinition) {
		t.Errorf("name with a slash: %v, want ErrInvalidDefinition", err)
	}
	if _, err := tools.New(tools.Definition{Schema: json.RawMessage(`{"$ref":"http://example.com/s.json"}`)}); err == nil {
		t.Error("a schema referring to a remote document compiled")
	}
}

// deliver hands msg to l and fails the test if the logic failed.
func deliver(t *testing.T, r *actorstest.Recorder, l actors.Logic, msg any) {
	t.Helper()
	if err := r.Deliver(l, msg); err != nil {
		t.Fatal(err)
	}
}

func TestToolLogic_DescribeTickAndOtherNames(t *testing.T) {
	tool := tools.MustNew(tools.Definition{Name: "greet", Description: "Returns a greeting", Schema: greetSchema,
		Capabilities: []string{"read", "net"}, Transactional: true, Irreversible: true, Handler: greet})
	l := tool.Logic()
	var r actorstest.Recorder
	deliver(t, &r, l, actors.Started{})
	deliver(t, &r, l, messages.Describe("d"))
	deliver(t, &r, l, messages.Tick("d"))
	deliver(t, &r, l, messages.ToolCall("d", "c1", "other", json.RawMessage(`{}`)))
	want := []string{
		`DESCRIPTION stream=d name=greet payload={"name":"greet","description":"Returns a greeting","schema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]},"capabilities":["read","net"],"transactional":true,"reversible":false,"idempotent":false,"sync":false,"timeoutMs":30000}`,
		`END stream=d`,
	}
	if got := lines(r.Emitted); !slices.Equal(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(r.Jobs) != 0 {
		t.Error("a call for another tool started work")
	}
}

func TestToolLogic_SyncCall(t *testing.T) {
	tool := tools.MustNew(tools.Definition{Name: "greet", Schema: greetSchema, Handler: greet, Sync: true})
	l := tool.Logic()
	var r actorstest.Recorder
	deliver(t, &r, l, messages.ToolCall("s1", "c1", "greet", json.RawMessage(`{"name":"Ada"}`)))
	want := []string{`TOOL_RESULT stream=s1 id=c1 name=greet payload={"greeting":"Hello, Ada"}`, `END stream=s1 id=c1`}
	if got := lines(r.Emitted); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestToolLogic_AsyncCallAndLateResult(t *testing.T) {
	tool := tools.MustNew(tools.Definition{Name: "greet", Schema: greetSchema, Handler: greet, Timeout: 1500 * time.Millisecond})
	l := tool.Logic()
	var r actorstest.Recorder
	deliver(t, &r, l, messages.ToolCall("s1", "c1", "greet", json.RawMessage(`{"name":"Ada"}`)))
	deliver(t, &r, l, messages.ToolCall("s1", "c2", "greet", json.RawMessage(`{"name":"Bob"}`)))
	deliver(t, &r, l, messages.ToolCall("s1", "c3", "greet", json.RawMessage(`{"name":"Cy"}`)))
	// One timer, for the first call's deadline: the later calls' deadlines
	// are later.
	if len(r.Jobs) != 3 || len(r.Timers) != 1 || r.Timers[0].D != 1500*time.Millisecond {
		t.Fatalf("jobs %d timers %v, want 3 jobs and one 1.5s timer", len(r.Jobs), r.Timers)
	}
	if len(r.Emitted) != 0 {
		t.Fatalf("async call answered before its work ran: %q", lines(r.Emitted))
	}
	// c2 finishes first; c1 times out (the timer is set again, for c3's
	// deadline), then its work returns late; c3 finishes before its
	// deadline, whose timer then finds nothing to do.
	deliver(t, &r, l, r.RunJob(context.Background(), 1))
	deliver(t, &r, l, actors.Timer{Key: r.Timers[0].Key})
	if len(r.Timers) != 2 || r.Timers[1].D > 1500*time.Millisecond {
		t.Fatalf("timers %v after the first deadline, want one more for c3's", r.Timers)
	}
	deliver(t, &r, l, r.RunJob(context.Background(), 0))
	deliver(t, &r, l, r.RunJob(context.Background(), 2))
	deliver(t, &r, l, actors.Timer{Key: r.Timers[1].Key})
	deliver(t, &r, l, actors.Timer{Key: r.Timers[0].Key}) // fired already: stale
	want := []string{
		`TOOL_RESULT stream=s1 id=c2 name=greet payload={"greeting":"Hello, Bob"}`, `END stream=s1 id=c2`,
		`TOOL_RESULT stream=s1 id=c1 name=greet is_error failure_kind=timeout payload={"success":false,"error":"Tool greet timed out after 1500ms"}`, `END stream=s1 id=c1`,
		`TOOL_RESULT stream=s1 id=c3 name=greet payload={"greeting":"Hello, Cy"}`, `END stream=s1 id=c3`,
	}
	if got := lines(r.Emitted); !slices.Equal(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(r.Timers) != 2 {
		t.Errorf("timers %v: a timer set with no call running", r.Timers)
	}
}

func TestToolLogic_Validation(t *testing.T) {
	var runs atomic.Int64
	counting := func(ctx context.Context, args json.RawMessage) (any, error) {
		runs.Add(1)
		return json.RawMessage(args), nil
	}
	greetTool := tools.MustNew(tools.Definition{Name: "greet", Schema: greetSchema, Handler: counting, Sync: true})
	noParams := tools.MustNew(tools.Definition{Name: "now", Handler: counting, Sync: true})
	cases := []struct {
		name string
		tool *tools.Tool
		args string
		want string // error message, or the echoed arguments
	}{
		{"wrong type", greetTool, `{"name":42}`, `invalid arguments for tool "greet": /name: expected string, got number`},
		{"missing field", greetTool, `{}`, `invalid arguments for tool "greet": /: missing properties: 'name'`},
		{"invalid JSON", greetTool, `{name:"x"}`, `invalid arguments for tool "greet": invalid JSON: invalid character 'n' looking for beginning of object key string`},
		{"truncated", greetTool, `{"name":"Ad`, `invalid arguments for tool "greet": invalid JSON: unexpected end of JSON input (truncated arguments)`},
		{"trailing data", greetTool, `{"name":"a"} {}`, `invalid arguments for tool "greet": invalid JSON: data after the top-level value`},
		{"not an object", noParams, `[1]`, `invalid arguments for tool "now": /: expected object, got array`},
		{"empty means {}", noParams, ``, `{}`},
		{"blank means {}", noParams, "  \n", `{}`},
		{"valid", greetTool, `{"name":"Ada"}`, `{"name":"Ada"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			runs.Store(0)
			var r actorstest.Recorder
			deliver(t, &r, tc.tool.Logic(), messages.ToolCall("s", "c", tc.tool.Name(), json.RawMessage(tc.args)))
			if len(r.Emitted) != 2 {
				t.Fatalf("emitted %q", lines(r.Emitted))
			}
			res := r.Emitted[0]
			if res.IsErrorResult() {
				var e messages.ErrorResult
				if err := res.Decode(&e); err != nil {
					t.Fatal(err)
				}
				if e.Error != tc.want || tools.KindOf(res) != tools.FailureInvalidArguments {
					t.Fatalf("error %q (%s), want %q", e.Error, tools.KindOf(res), tc.want)
				}
				if runs.Load() != 0 {
					t.Fatal("handler ran on invalid arguments")
				}
				return
			}
			if string(res.GetPayload()) != tc.want || runs.Load() != 1 {
				t.Fatalf("result %s after %d runs, want %s after 1", res.GetPayload(), runs.Load(), tc.want)
			}
		})
	}
}

func TestToolLogic_HandlerErrorAndCancel(t *testing.T) {
	tool := tools.MustNew(tools.Definition{Name: "fail", Handler: func(context.Context, json.RawMessage) (any, error) {
		return nil, errors.New("disk full")
	}})
	l := tool.Logic()
	var r actorstest.Recorder
	deliver(t, &r, l, messages.ToolCall("s", "c1", "fail", nil))
	deliver(t, &r, l, r.RunJob(context.Background(), 0))
	deliver(t, &r, l, messages.ToolCall("s", "c2", "fail", nil))
	deliver(t, &r, l, messages.ToolCall("s", "c3", "fail", nil))
	deliver(t, &r, l, messages.ToolCall("t", "c4", "fail", nil))
	deliver(t, &r, l, messages.Cancel("s", "c3"))
	deliver(t, &r, l, messages.Abort("s"))
	deliver(t, &r, l, messages.ToolCall("t", "c4", "fail", nil)) // duplicate id while running: ignored
	deliver(t, &r, l, messages.Cancel("t", ""))
	want := []string{
		`TOOL_RESULT stream=s id=c1 name=fail is_error failure_kind=handler_error payload={"success":false,"error":"disk full"}`, `END stream=s id=c1`,
		`TOOL_RESULT stream=s id=c3 name=fail is_error failure_kind=cancelled payload={"success":false,"error":"Tool call cancelled"}`, `END stream=s id=c3`,
		`TOOL_RESULT stream=s id=c2 name=fail is_error failure_kind=cancelled payload={"success":false,"error":"Tool call aborted"}`, `END stream=s id=c2`,
		`TOOL_RESULT stream=t id=c4 name=fail is_error failure_kind=cancelled payload={"success":false,"error":"Tool call cancelled"}`, `END stream=t id=c4`,
	}
	if got := lines(r.Emitted); !slices.Equal(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The handlers' late returns are discarded.
	n := len(r.Emitted)
	for i := 1; i < len(r.Jobs); i++ {
		deliver(t, &r, l, r.RunJob(context.Background(), i))
	}
	if len(r.Emitted) != n {
		t.Fatalf("late results delivered: %q", lines(r.Emitted[n:]))
	}
}

func TestToolLogic_AsyncPanicFailsAndAnswersEveryCall(t *testing.T) {
	tool := tools.MustNew(tools.Definition{Name: "p"})
	l := tool.Logic()
	var r actorstest.Recorder
	deliver(t, &r, l, messages.ToolCall("s", "c1", "p", nil))
	deliver(t, &r, l, messages.ToolCall("s", "c2", "p", nil))
	err := r.Deliver(l, actors.AsyncDone{Key: r.Jobs[0].Key, Err: &actors.PanicError{Actor: "x", Value: "boom"}})
	var hp *tools.HandlerPanicError
	if !errors.As(err, &hp) || hp.ToolCallID != "c1" {
		t.Fatalf("failure %v, want a *HandlerPanicError for c1", err)
	}
	l.(actors.FailureHandler).OnFailure(&r, err)
	want := []string{
		`TOOL_RESULT stream=s id=c1 name=p is_error failure_kind=panic payload={"success":false,"error":"Tool p panicked: boom"}`, `END stream=s id=c1`,
		`TOOL_RESULT stream=s id=c2 name=p is_error failure_kind=stopped payload={"success":false,"error":"Tool p stopped: tool \"p\" panicked in call c1: panic in x: boom"}`, `END stream=s id=c2`,
	}
	if got := lines(r.Emitted); !slices.Equal(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestTool_PanicRestartsTool runs a tool in an actor system: a panicking
// call and the call running beside it each get one error result, and the
// restarted tool serves the next call.
func TestTool_PanicRestartsTool(t *testing.T) {
	for _, sync := range []bool{false, true} {
		name := map[bool]string{false: "async", true: "sync"}[sync]
		t.Run(name, func(t *testing.T) {
			rt := newRuntime(t)
			tool := tools.MustNew(tools.Definition{Name: "p", Sync: sync, Handler: func(ctx context.Context, args json.RawMessage) (any, error) {
				switch string(args) {
				case `{"do":"panic"}`:
					panic("boom")
				case `{"do":"wait"}`:
					<-ctx.Done()
					return nil, ctx.Err()
				}
				return "ok", nil
			}})
			conn := start(t, rt, tool.Spec())
			var frames []*messages.Frame
			if !sync { // a sync tool cannot have another call in flight
				if err := conn.Send(messages.ToolCall("w", "wait", "p", json.RawMessage(`{"do":"wait"}`))); err != nil {
					t.Fatal(err)
				}
			}
			if err := conn.Send(messages.ToolCall("x", "boom", "p", json.RawMessage(`{"do":"panic"}`))); err != nil {
				t.Fatal(err)
			}
			n := 2
			if !sync {
				n = 4
			}
			frames = recvN(t, conn, n)
			got := map[string]string{}
			for _, f := range frames {
				if f.GetType() == messages.FrameType_TOOL_RESULT {
					got[f.GetToolCallId()] = string(tools.KindOf(f))
				}
			}
			if got["boom"] != "panic" || (!sync && got["wait"] != "stopped") {
				t.Fatalf("results %v from %q", got, lines(frames))
			}
			if err := conn.Send(messages.ToolCall("after", "ok", "p", json.RawMessage(`{}`))); err != nil {
				t.Fatal(err)
			}
			after, err := conn.RecvStream(testCtx(t), "after")
			if err != nil || len(after) != 2 || string(after[0].GetPayload()) != `"ok"` {
				t.Fatalf("after restart: %q, %v", lines(after), err)
			}
		})
	}
}

// TestTool_TimeoutWithHandlerIgnoringContext: a handler that ignores its
// context still gets its timeout result on time, and its late result is
// never delivered.
func TestTool_TimeoutWithHandlerIgnoringContext(t *testing.T) {
	rt := newRuntime(t)
	release := make(chan struct{})
	returned := make(chan struct{})
	tool := tools.MustNew(tools.Definition{Name: "stubborn", Timeout: 20 * time.Millisecond,
		Handler: func(ctx context.Context, args json.RawMessage) (any, error) {
			if string(args) == `{"quick":true}` {
				return "quick", nil
			}
			defer close(returned)
			<-release // ignores ctx
			return "late", nil
		}})
	conn := start(t, rt, tool.Spec())
	if err := conn.Send(messages.ToolCall("s", "slow", "stubborn", nil)); err != nil {
		t.Fatal(err)
	}
	got, err := conn.RecvStream(testCtx(t), "s")
	if err != nil || len(got) != 2 || tools.KindOf(got[0]) != tools.FailureTimeout {
		t.Fatalf("got %q, %v; want a timeout result", lines(got), err)
	}
	if want := `{"success":false,"error":"Tool stubborn timed out after 20ms"}`; string(got[0].GetPayload()) != want {
		t.Errorf("payload %s, want %s", got[0].GetPayload(), want)
	}
	close(release)
	<-returned
	// Whenever the handler's late result reaches the actor, it is dropped:
	// the next frames are this call's, nothing more for "slow".
	if err := conn.Send(messages.ToolCall("s2", "quick", "stubborn", json.RawMessage(`{"quick":true}`))); err != nil {
		t.Fatal(err)
	}
	next := recvN(t, conn, 2)
	if next[0].GetToolCallId() != "quick" || string(next[0].GetPayload()) != `"quick"` {
		t.Fatalf("after the timeout got %q", lines(next))
	}
}

// TestToolLogic_ResultNotHTMLEscaped: a result reaches the model with
// "<", ">" and "&" as themselves.
func TestToolLogic_ResultNotHTMLEscaped(t *testing.T) {
	tool := tools.MustNew(tools.Definition{Name: "cmp", Sync: true, Handler: func(context.Context, json.RawMessage) (any, error) {
		return map[string]string{"out": "a < b && b > c"}, nil
	}})
	var r actorstest.Recorder
	deliver(t, &r, tool.Logic(), messages.ToolCall("s1", "c1", "cmp", nil))
	if got := string(r.Emitted[0].GetPayload()); got != `{"out":"a < b && b > c"}` {
		t.Fatalf("result %s", got)
	}
}
