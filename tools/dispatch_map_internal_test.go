package tools

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
)

// TestDispatcher_SyncCallsTouchNoMap: a dispatcher whose calls are all
// answered in the caller's turn makes no map of outstanding calls (each
// call's duplicate check then reads none of its memory, which in a host
// of many sessions is seldom in the cache), and each call is answered
// once.
func TestDispatcher_SyncCallsTouchNoMap(t *testing.T) {
	tool := MustNew(Definition{Name: "s", Sync: true, Handler: func(context.Context, json.RawMessage) (any, error) {
		return true, nil
	}})
	var answered []*messages.Frame
	d := newDispatcher([]*Tool{tool}, BreakerOptions{}, func(_ actors.WrapperContext, _, result *messages.Frame) {
		answered = append(answered, result)
	})
	c := &inlineCtx{}
	for _, id := range []string{"c1", "c2", "c1"} {
		d.run(c, messages.ToolCall("st", id, "s", json.RawMessage(`{}`)))
	}
	if len(answered) != 3 || answered[2].GetToolCallId() != "c1" || KindOf(answered[2]) != "" {
		t.Fatalf("answered %v, want the three calls' results", answered)
	}
	if d.outstanding != nil {
		t.Errorf("a dispatcher of sync calls holds a map of outstanding calls")
	}
}
