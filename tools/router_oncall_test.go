package tools_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// TestRouterOptions_OnCall: the hook of a call runner sees each call whose
// handler runs, Sync or not, with the handler's ctx (CallFrom gives the
// call), before the handler, and its done func once the handler has
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
		OnCall: func(ctx context.Context) func() {
			call, ok := tools.CallFrom(ctx)
			if !ok {
				t.Error("OnCall's ctx has no call")
			}
			note("begin " + call.ToolCallID + " " + call.Tool + " " + call.StreamID)
			return func() { note("end " + call.ToolCallID) }
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
