package tooltest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// Options tune [Run] to a tool. A nil *Options or a zero field means the
// default.
type Options struct {
	// ValidArgs are arguments the tool accepts; default {}.
	ValidArgs json.RawMessage
	// InvalidArgs are JSON arguments that violate the tool's schema. Each
	// must get an error result without the handler running. Invalid and
	// truncated JSON are always tried.
	InvalidArgs []json.RawMessage
	// SlowArgs are arguments whose call runs until it is cancelled (a
	// command that sleeps, say); default ValidArgs. With them the suite
	// checks that CANCEL answers the call within CancelGrace and that the
	// handler returns once its context is cancelled.
	SlowArgs json.RawMessage
	// CancelGrace bounds how long a cancelled handler may take to return;
	// default 5 s.
	CancelGrace time.Duration
	// Concurrency is the number of concurrent calls; default 8.
	Concurrency int
}

// Run checks that tool behaves as every Polyweave tool must: it describes
// itself, rejects invalid input with an error result before its handler
// runs, honours cancellation, and answers each of many concurrent calls
// exactly once. Each check runs its own actor runtime and verifies that no
// goroutine is left behind.
func Run(t *testing.T, tool *tools.Tool, opts *Options) {
	t.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	if len(o.ValidArgs) == 0 {
		o.ValidArgs = json.RawMessage("{}")
	}
	if len(o.SlowArgs) == 0 {
		o.SlowArgs = o.ValidArgs
	}
	if o.CancelGrace <= 0 {
		o.CancelGrace = 5 * time.Second
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 8
	}
	t.Run("Describe", func(t *testing.T) { testDescribe(t, tool) })
	t.Run("ValidCall", func(t *testing.T) { testValidCall(t, tool, o) })
	t.Run("InvalidInput", func(t *testing.T) { testInvalidInput(t, tool, o) })
	t.Run("Cancel", func(t *testing.T) { testCancel(t, tool, o) })
	t.Run("ConcurrentCalls", func(t *testing.T) { testConcurrent(t, tool, o) })
}

// start runs spec in a fresh runtime closed (and leak-checked) at cleanup.
func start(t *testing.T, spec actors.Spec) (*actors.Conn, context.Context) {
	t.Helper()
	before := goleak.IgnoreCurrent()
	rt, err := actors.NewRuntime(nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(func() {
		defer cancel()
		if err := rt.Close(ctx); err != nil {
			t.Errorf("close runtime: %v", err)
		}
		leakcheck.VerifyNone(t, before)
	})
	conn, err := rt.Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	return conn, ctx
}

func testDescribe(t *testing.T, tool *tools.Tool) {
	conn, ctx := start(t, tool.Spec())
	if err := conn.Send(messages.Describe("d")); err != nil {
		t.Fatal(err)
	}
	got, err := conn.RecvStream(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].GetType() != messages.FrameType_DESCRIPTION {
		t.Fatalf("DESCRIBE answered with %v, want DESCRIPTION then END", got)
	}
	var d tools.Description
	if err := got[0].Decode(&d); err != nil {
		t.Fatal(err)
	}
	if d.Name != tool.Name() || d.Description == "" || len(d.Capabilities) == 0 || !json.Valid(d.Schema) {
		t.Errorf("description %+v: want the tool's name, a description, capabilities and a schema", d)
	}
}

// call sends one call and returns the frames of its answer (up to its END).
func call(t *testing.T, conn *actors.Conn, ctx context.Context, stream, id, name string, args json.RawMessage) []*messages.Frame {
	t.Helper()
	if err := conn.Send(messages.ToolCall(stream, id, name, args)); err != nil {
		t.Fatal(err)
	}
	got, err := conn.RecvStream(ctx, stream)
	if err != nil {
		t.Fatalf("call %s: %v", id, err)
	}
	return got
}

// checkOneResult checks frames are one TOOL_RESULT for id then END.
func checkOneResult(t *testing.T, frames []*messages.Frame, id string) *messages.Frame {
	t.Helper()
	if len(frames) != 2 || frames[0].GetType() != messages.FrameType_TOOL_RESULT || frames[1].GetType() != messages.FrameType_END {
		t.Fatalf("call %s answered with %v, want TOOL_RESULT then END", id, frames)
	}
	if frames[0].GetToolCallId() != id {
		t.Fatalf("result for %q, want %q", frames[0].GetToolCallId(), id)
	}
	if !json.Valid(frames[0].GetPayload()) {
		t.Fatalf("result payload %q is not JSON", frames[0].GetPayload())
	}
	return frames[0]
}

func testValidCall(t *testing.T, tool *tools.Tool, o Options) {
	conn, ctx := start(t, tool.Spec())
	checkOneResult(t, call(t, conn, ctx, "v", "v1", tool.Name(), o.ValidArgs), "v1")
	// Calls for other tools are not this tool's to answer.
	if err := conn.Send(messages.ToolCall("other", "x1", tool.Name()+"-other", o.ValidArgs)); err != nil {
		t.Fatal(err)
	}
	checkOneResult(t, call(t, conn, ctx, "v2", "v2", tool.Name(), o.ValidArgs), "v2")
}

// counted returns a copy of tool whose handler counts its runs.
func counted(t *testing.T, tool *tools.Tool) (*tools.Tool, *atomic.Int64) {
	t.Helper()
	var runs atomic.Int64
	def := tool.Definition()
	h := def.Handler
	def.Handler = func(ctx context.Context, args json.RawMessage) (any, error) {
		runs.Add(1)
		return h(ctx, args)
	}
	c, err := tools.New(def)
	if err != nil {
		t.Fatal(err)
	}
	return c, &runs
}

func testInvalidInput(t *testing.T, tool *tools.Tool, o Options) {
	c, runs := counted(t, tool)
	conn, ctx := start(t, c.Spec())
	cases := append([]json.RawMessage{json.RawMessage(`{not json`), json.RawMessage(`{"a":`), json.RawMessage(`{} {}`)}, o.InvalidArgs...)
	for i, args := range cases {
		id := fmt.Sprintf("bad%d", i)
		r := checkOneResult(t, call(t, conn, ctx, id, id, c.Name(), args), id)
		if !r.IsErrorResult() || tools.KindOf(r) != tools.FailureInvalidArguments {
			t.Errorf("arguments %s: got %s, want an invalid-arguments error result", args, r.GetPayload())
		}
	}
	if n := runs.Load(); n != 0 {
		t.Errorf("handler ran %d times for invalid input, want 0", n)
	}
}

func testCancel(t *testing.T, tool *tools.Tool, o Options) {
	// The handler returns soon after its context is cancelled.
	def := tool.Definition()
	hctx, cancel := context.WithCancel(context.Background())
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		_, _ = def.Handler(hctx, o.SlowArgs)
	}()
	cancel()
	select {
	case <-returned:
	case <-time.After(o.CancelGrace):
		t.Fatalf("handler still running %v after its context was cancelled", o.CancelGrace)
	}
	// A CANCEL answers the call once, as cancelled unless it had finished.
	conn, ctx := start(t, tool.Spec())
	if err := conn.SendAll(messages.ToolCall("c", "c1", tool.Name(), o.SlowArgs), messages.Cancel("c", "c1")); err != nil {
		t.Fatal(err)
	}
	waitCtx, stop := context.WithTimeout(ctx, o.CancelGrace)
	defer stop()
	got, err := conn.RecvStream(waitCtx, "c")
	if err != nil {
		t.Fatalf("cancelled call not answered within %v: %v", o.CancelGrace, err)
	}
	r := checkOneResult(t, got, "c1")
	if r.IsErrorResult() && tools.KindOf(r) != tools.FailureCancelled {
		t.Errorf("cancelled call: got %s (%s), want a cancelled result or the handler's own", r.GetPayload(), tools.KindOf(r))
	}
	// Nothing more comes for that call: the next stream's answer is next.
	checkOneResult(t, call(t, conn, ctx, "after", "a1", tool.Name(), o.ValidArgs), "a1")
}

func testConcurrent(t *testing.T, tool *tools.Tool, o Options) {
	conn, ctx := start(t, tool.Spec())
	const stream = "many"
	for i := range o.Concurrency {
		if err := conn.Send(messages.ToolCall(stream, fmt.Sprintf("m%d", i), tool.Name(), o.ValidArgs)); err != nil {
			t.Fatal(err)
		}
	}
	results := map[string]int{}
	ends := 0
	for ends < o.Concurrency {
		f, err := conn.Recv(ctx)
		if err != nil {
			t.Fatalf("after %d answers: %v", ends, err)
		}
		switch f.GetType() {
		case messages.FrameType_TOOL_RESULT:
			results[f.GetToolCallId()]++
		case messages.FrameType_END:
			ends++
		default:
			t.Fatalf("unexpected %s frame", f.GetType())
		}
	}
	for i := range o.Concurrency {
		if id := fmt.Sprintf("m%d", i); results[id] != 1 {
			t.Errorf("call %s got %d results, want 1", id, results[id])
		}
	}
	// A marker call proves nothing else was queued behind.
	checkOneResult(t, call(t, conn, ctx, "marker", "mk", tool.Name(), o.ValidArgs), "mk")
}
