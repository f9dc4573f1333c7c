package tools

import (
	"context"
	"encoding/json"
	"runtime"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/messages"
)

// TestCallInline_ValidationPanicIsTheCallsResult: a panic while a Sync
// tool's arguments are validated is that call's answer (a panicked error
// result), like a panic in its handler: the runner running it inline does
// not fail, and the call is not left without a result.
func TestCallInline_ValidationPanicIsTheCallsResult(t *testing.T) {
	ran := false
	tool := MustNew(Definition{Name: "v", Sync: true, Handler: func(context.Context, json.RawMessage) (any, error) {
		ran = true
		return "ran", nil
	}})
	tool.validator = &validator{tool: "v"} // no compiled schema: validating arguments other than {} panics
	spec, err := NewCallRunner(&RouterOptions{Tools: []*Tool{tool}})
	if err != nil {
		t.Fatal(err)
	}
	var r actorstest.Recorder
	l := spec.New()
	if err := r.Deliver(l, actors.Started{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Deliver(l, messages.ToolCall("s", "c1", "v", json.RawMessage(`{"a":1}`))); err != nil {
		t.Fatalf("the runner failed: %v", err)
	}
	if len(r.Emitted) == 0 || r.Emitted[0].GetType() != messages.FrameType_TOOL_RESULT ||
		KindOf(r.Emitted[0]) != FailurePanic || r.Emitted[0].GetToolCallId() != "c1" {
		t.Fatalf("emitted %d frames, want a panicked result for c1 first: %v", len(r.Emitted), r.Emitted)
	}
	if ran {
		t.Error("the handler ran without validated arguments")
	}
}

// inlineCtx is the context of a call run inline outside any dispatcher,
// for tests: a Recorder (its logger discards) that is a wrapper's.
type inlineCtx struct{ actorstest.Recorder }

func (*inlineCtx) ToInner(*messages.Frame)     {}
func (c *inlineCtx) ToOuter(f *messages.Frame) { c.Emit(f) }
func (c *inlineCtx) ToOuterPassed(f *messages.Frame) bool {
	c.Emit(f)
	return true
}
func (*inlineCtx) Inner() actors.Ref { return actors.Ref{} }

// TestCallInline_Allocations: an inline call of a typed tool with a flat
// result allocates its context, its result frame and the result's bytes:
// three allocations a call, which 1 000 sessions at once pay to the
// collector as much as one session does. The context is not allocated
// with the frame (see TestCallInline_KeptContextKeepsNoResult).
func TestCallInline_Allocations(t *testing.T) {
	type in struct {
		N int `json:"n"`
	}
	type out struct {
		OK bool `json:"ok"`
	}
	tool := MustNewTyped(Definition{Name: "noop", Sync: true}, func(_ context.Context, a in) (out, error) {
		return out{OK: a.N == 1}, nil
	})
	call := messages.ToolCall("s", "c1", "noop", json.RawMessage(`{"n":1}`))
	c := &inlineCtx{}
	var result *messages.Frame
	n := testing.AllocsPerRun(100, func() { result = tool.callInline(c, call) })
	if KindOf(result) != "" || string(result.GetPayload()) != `{"ok":true}` || result.GetToolCallId() != "c1" ||
		result.GetStreamId() != "s" || result.GetName() != "noop" || result.GetType() != messages.FrameType_TOOL_RESULT {
		t.Fatalf("result %s", messages.Format(result))
	}
	if n > 3 && !raceDetector { // it instruments allocations; the result is checked still
		t.Errorf("an inline call allocates %v times, want 3 (its context, its result frame, the result's bytes)", n)
	}
}

// TestCallInline_KeptContextKeepsNoResult: a handler that keeps its
// context past its return (a goroutine it started, a value it stored)
// keeps no more than before: not the call's result, whose payload may
// be large, once the caller has dropped it.
func TestCallInline_KeptContextKeepsNoResult(t *testing.T) {
	var kept context.Context
	freed := make(chan struct{})
	tool := MustNew(Definition{Name: "big", Sync: true, Timeout: time.Hour, Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
		kept = ctx
		big := make([]byte, 1<<20)
		for i := range big {
			big[i] = ' '
		}
		big[0], big[len(big)-1] = '[', ']'
		runtime.SetFinalizer(&big[0], func(*byte) { close(freed) })
		return json.RawMessage(big), nil
	}})
	result := tool.callInline(&inlineCtx{}, messages.ToolCall("s", "c1", "big", json.RawMessage(`{}`)))
	if KindOf(result) != "" || len(result.GetPayload()) != 1<<20 {
		t.Fatalf("result %s", messages.Format(result))
	}
	result = nil
	patience := time.After(5 * time.Second)
	for done := false; !done; {
		runtime.GC()
		select {
		case <-freed:
			done = true
		case <-patience:
			t.Fatal("the result's payload is still kept, by the context its handler kept")
		case <-time.After(10 * time.Millisecond): // the finalizer runs after a GC, on a goroutine of its own
		}
	}
	runtime.KeepAlive(kept)
	runtime.KeepAlive(tool)
}
