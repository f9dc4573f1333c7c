package tools_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// TestRouterOptions_OnCall: the hook of a call runner sees each call whose
// handler runs, Sync or not, with the handler's ctx (CallFrom gives the
// call), before the handler, and again, ended, once the handler has
// returned, a panicking one included; calls answered without their
// handler (an unknown tool, invalid arguments) never reach it.
func TestRouterOptions_OnCall(t *testing.T) {
	rt := newRuntime(t)
	var (
		mu  sync.Mutex
		log []string
	)
	note := func(s string) {
		mu.Lock()
		log = append(log, s)
		mu.Unlock()
	}
	handler := func(ctx context.Context, _ json.RawMessage) (any, error) {
		call, _ := tools.CallFrom(ctx)
		note("run " + call.ToolCallID)
		if call.Tool == "boom" {
			panic("boom")
		}
		return nil, nil
	}
	schema := json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)
	spec, err := tools.NewCallRunner(&tools.RouterOptions{
		Tools: []*tools.Tool{
			tools.MustNew(tools.Definition{Name: "inline", Sync: true, Handler: handler, Schema: schema}),
			tools.MustNew(tools.Definition{Name: "async", Handler: handler}),
			tools.MustNew(tools.Definition{Name: "boom", Handler: handler}),
		},
		OnCall: func(ctx context.Context, ended bool) {
			call, ok := tools.CallFrom(ctx)
			switch {
			case !ok:
				t.Error("OnCall's ctx has no call")
			case ended:
				note("end " + call.ToolCallID)
			default:
				note("begin " + call.ToolCallID + " " + call.Tool + " " + call.StreamID)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	conn := start(t, rt, spec)
	ctx := testCtx(t)
	for _, c := range []struct{ id, tool, args string }{
		{"c1", "inline", `{}`}, {"c2", "async", `{}`}, {"c3", "boom", `{}`},
		{"c4", "nope", `{}`}, {"c5", "inline", `{"n":"one"}`},
	} {
		// Its result and the END closing its stream: the handler, if it
		// ran, has returned.
		if err := conn.Send(messages.ToolCall("s-"+c.id, c.id, c.tool, raw(c.args))); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.RecvStream(ctx, "s-"+c.id); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{
		"begin c1 inline s-c1", "run c1", "end c1",
		"begin c2 async s-c2", "run c2", "end c2",
		"begin c3 boom s-c3", "run c3", "end c3",
	}
	if !slices.Equal(log, want) {
		t.Errorf("OnCall saw\n%q\nwant\n%q", log, want)
	}
}

// TestRouterOptions_OnCallPastTimeout: a handler that ignores its ctx
// outlives its call's timeout: the call is answered as timed out while
// the handler is still between OnCall's two calls; the one that says it
// ended comes once, when the handler returns, the handler's ctx ended by
// then (the call was answered without it).
func TestRouterOptions_OnCallPastTimeout(t *testing.T) {
	rt := newRuntime(t)
	release, ended := make(chan struct{}), make(chan struct{})
	var begun, done atomic.Int32
	var ctxEnded atomic.Bool
	spec, err := tools.NewCallRunner(&tools.RouterOptions{
		Tools: []*tools.Tool{tools.MustNew(tools.Definition{Name: "slow", Timeout: time.Millisecond,
			Handler: func(context.Context, json.RawMessage) (any, error) { <-release; return nil, nil }})},
		OnCall: func(ctx context.Context, end bool) {
			if !end {
				begun.Add(1)
				return
			}
			ctxEnded.Store(ctx.Err() != nil)
			if done.Add(1) == 1 {
				close(ended)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	conn := start(t, rt, spec)
	if err := conn.Send(messages.ToolCall("s", "c1", "slow", raw(`{}`))); err != nil {
		t.Fatal(err)
	}
	frames, err := conn.RecvStream(testCtx(t), "s")
	if err != nil {
		t.Fatal(err)
	}
	if text := strings.Join(lines(frames), "\n"); !strings.Contains(text, "timed out") {
		t.Fatalf("the call's answer:\n%s\nwant its timeout", text)
	}
	if n := done.Load(); begun.Load() != 1 || n != 0 {
		t.Fatalf("OnCall begun %d time(s), done %d, while the handler runs past its timeout: want 1 and 0", begun.Load(), n)
	}
	close(release)
	<-ended
	if n := done.Load(); n != 1 || !ctxEnded.Load() {
		t.Errorf("done ran %d time(s) (handler's ctx ended: %v), want once, the ctx ended", n, ctxEnded.Load())
	}
}
