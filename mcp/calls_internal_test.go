package mcp

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/messages"
)

// TestCallWait_EndWithoutResult: a call whose stream ends without a
// TOOL_RESULT (the runner lost it: it failed while taking the call) is
// answered with an error result when its END comes, instead of leaving
// the request waiting for a result that will never come. The real runner
// answers every call it takes, even when it fails (its tests say so), so
// a stand-in duplex plays one that loses a call.
func TestCallWait_EndWithoutResult(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	loses := actors.Duplex("loses-calls", func(f *messages.Frame, emit func(*messages.Frame)) {
		if f.GetType() == messages.FrameType_TOOL_CALL {
			emit(messages.Error(f.GetStreamId(), "the runner failed"))
			emit(messages.End(f.GetStreamId()))
		}
	})
	mux, err := rt.StartMux(loses)
	if err != nil {
		t.Fatal(err)
	}
	c := &caller{mux: mux}
	cl, err := c.start("add", nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *messages.Frame, 1)
	go func() { done <- cl.wait(context.Background()) }()
	// A guard against hanging forever, not a measure of speed.
	guard := time.NewTimer(10 * time.Second)
	defer guard.Stop()
	var f *messages.Frame
	select {
	case f = <-done:
	case <-guard.C:
		t.Error("wait still waiting after the call's stream ended")
		_ = c.close(context.Background()) // the router's stop answers it
		f = <-done
	}
	if f.GetType() != messages.FrameType_TOOL_RESULT || !f.IsErrorResult() ||
		!strings.Contains(string(f.GetPayload()), "not answered") || !strings.Contains(string(f.GetPayload()), "the runner failed") {
		t.Errorf("answer: %s", messages.Format(f))
	}
	if err := c.close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
