package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/polyweave/polyweave-go/messages"
)

// TestSyncContext: the context a Sync handler run inline gets behaves as
// the context.WithTimeout it replaces: it names the call, has the
// deadline, its done channel closes at the deadline for a handler that
// waits on it, a handler that overruns is answered with the timeout, and
// once the handler has returned the context is cancelled for whatever
// kept it (a goroutine, a child context). It runs on synctest's clock, so
// a loaded machine cannot make the quick handler start past its 5 ms.
func TestSyncContext(t *testing.T) {
	synctest.Test(t, testSyncContext)
}

func testSyncContext(t *testing.T) {
	kept := make(chan context.Context, 1)
	child := make(chan context.Context, 1)
	var seen CallInfo
	tool := MustNew(Definition{Name: "waits", Sync: true, Timeout: 5 * time.Millisecond,
		Handler: func(ctx context.Context, args json.RawMessage) (any, error) {
			seen, _ = CallFrom(ctx)
			if string(args) == `{"wait":true}` {
				<-ctx.Done() // made on demand, closed at the deadline
				return nil, ctx.Err()
			}
			if _, ok := ctx.Deadline(); !ok || ctx.Err() != nil {
				t.Errorf("deadline %v, err %v before the deadline", ok, ctx.Err())
			}
			kept <- ctx
			c, cancel := context.WithCancel(ctx)
			child <- c
			_ = cancel // cancelled with its parent when the handler returns
			return map[string]bool{"ok": true}, nil
		}})

	result := tool.callInline(&inlineCtx{}, messages.ToolCall("s", "c1", "waits", json.RawMessage(`{"wait":true}`)))
	if KindOf(result) != FailureTimeout || seen != (CallInfo{StreamID: "s", ToolCallID: "c1", Tool: "waits"}) {
		t.Fatalf("waiting handler: %s (call %+v), want a timeout", messages.Format(result), seen)
	}

	result = tool.callInline(&inlineCtx{}, messages.ToolCall("s", "c2", "waits", json.RawMessage(`{}`)))
	if KindOf(result) != "" || string(result.GetPayload()) != `{"ok":true}` {
		t.Fatalf("quick handler: %s", messages.Format(result))
	}
	ctx, c := <-kept, <-child
	<-ctx.Done()
	<-c.Done()
	if !errors.Is(ctx.Err(), context.Canceled) || !errors.Is(c.Err(), context.Canceled) {
		t.Errorf("after the handler returned: err %v, child's %v; want both cancelled", ctx.Err(), c.Err())
	}

	// A handler that overruns without looking at its context.
	slow := MustNew(Definition{Name: "slow", Sync: true, Timeout: time.Millisecond,
		Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
			deadline, _ := ctx.Deadline()
			<-time.After(time.Until(deadline) + time.Millisecond)
			return nil, nil
		}})
	if result := slow.callInline(&inlineCtx{}, messages.ToolCall("s", "c3", "slow", nil)); KindOf(result) != FailureTimeout {
		t.Fatalf("overrunning handler: %s", messages.Format(result))
	}

	// Without a timeout: never done, as context.Background.
	free := MustNew(Definition{Name: "free", Sync: true, Timeout: NoTimeout,
		Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
			if _, ok := ctx.Deadline(); ok || ctx.Done() != nil || ctx.Err() != nil {
				t.Errorf("no timeout: deadline %v, done %v, err %v", ok, ctx.Done(), ctx.Err())
			}
			return nil, nil
		}})
	if result := free.callInline(&inlineCtx{}, messages.ToolCall("s", "c4", "free", nil)); KindOf(result) != "" {
		t.Fatalf("handler without timeout: %s", messages.Format(result))
	}
}

// TestSyncContext_Size: the context of every inline Sync call stays in
// the 64-byte size class; what Done makes is apart.
func TestSyncContext_Size(t *testing.T) {
	if n := unsafe.Sizeof(syncContext{}); n > 64 {
		t.Errorf("a syncContext is %d bytes, want at most 64", n)
	}
}

// TestSyncContext_OverrunAfterDone: a handler that made its done channel
// and then overran its deadline (it returned once the deadline was
// reached, without waiting for the channel) is answered with the
// timeout, as one that never asked for the channel is: the answer does
// not hang on whether the channel's timer has fired yet.
func TestSyncContext_OverrunAfterDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tool := MustNew(Definition{Name: "overruns", Sync: true, Timeout: time.Millisecond,
			Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
				_ = ctx.Done() // selected on, say, then left
				deadline, _ := ctx.Deadline()
				time.Sleep(time.Until(deadline))
				return map[string]bool{"ok": true}, nil
			}})
		for i := range 20 {
			call := messages.ToolCall("s", fmt.Sprint("c", i), "overruns", nil)
			if result := tool.callInline(&inlineCtx{}, call); KindOf(result) != FailureTimeout {
				t.Fatalf("call %d overran its deadline after asking for its done channel: %s, want a timeout", i, messages.Format(result))
			}
		}
	})
}
