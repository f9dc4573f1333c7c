package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// TestCallRunner: calls written into a call runner, each on a stream of
// its own, get exactly one TOOL_RESULT each, as a router gives them: run
// inline (Sync) or on the tool's actor, unknown tools and invalid
// arguments answered with error results, a CANCEL answering the running
// call of its stream; other frames are dropped.
func TestCallRunner(t *testing.T) {
	rt := newRuntime(t)
	greetTool := tools.MustNewTyped(tools.Definition{Name: "greet", Sync: true}, func(_ context.Context, in greetIn) (string, error) {
		return "Hello, " + in.Name, nil
	})
	started := make(chan struct{})
	slow := tools.MustNew(tools.Definition{Name: "slow", Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}})
	spec, err := tools.NewCallRunner(&tools.RouterOptions{Tools: []*tools.Tool{greetTool, slow}})
	if err != nil {
		t.Fatal(err)
	}
	mux, err := rt.StartMux(spec)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	open := func(id string) *actors.MuxStream {
		s, err := mux.Open(id)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	calls := []struct {
		stream, tool, args, want string
	}{
		{"a", "greet", `{"name":"Ada"}`, `TOOL_RESULT stream=a id=a name=greet payload="Hello, Ada"`},
		{"b", "nope", `{}`, `TOOL_RESULT stream=b id=b name=nope is_error failure_kind=unknown_tool payload={"success":false,"error":"Unknown tool: nope"}`},
		{"c", "greet", `{"name":1}`, ""}, // invalid arguments, worded by the validator
	}
	streams := map[string]*actors.MuxStream{}
	for _, c := range calls {
		s := open(c.stream)
		streams[c.stream] = s
		// A frame that is not a call is dropped: the call's result comes first.
		if err := s.SendAll(messages.Text(c.stream, "not a call"), messages.ToolCall(c.stream, c.stream, c.tool, raw(c.args))); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range calls {
		f, err := streams[c.stream].Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case c.want != "" && line(f) != c.want:
			t.Errorf("stream %s: got %s, want %s", c.stream, line(f), c.want)
		case c.want == "" && tools.KindOf(f) != tools.FailureInvalidArguments:
			t.Errorf("stream %s: got %s, want an invalid_arguments result", c.stream, line(f))
		}
	}
	d := open("d")
	streams["d"] = d
	if err := d.Send(messages.ToolCall("d", "d", "slow", raw(`{}`))); err != nil {
		t.Fatal(err)
	}
	<-started
	if err := d.Send(messages.Cancel("d", "d")); err != nil {
		t.Fatal(err)
	}
	f, err := d.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if f.GetType() != messages.FrameType_TOOL_RESULT || tools.KindOf(f) != tools.FailureCancelled {
		t.Errorf("cancelled call: got %s", line(f))
	}
	// One result per call: once the runner is gone, what is queued after
	// each result is the stream's closing (ERROR and END), no result.
	if err := mux.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for id, s := range streams {
		for {
			f, err := s.Recv(ctx)
			if errors.Is(err, actors.ErrDuplexStopped) {
				break
			}
			if err != nil || f.GetType() == messages.FrameType_TOOL_RESULT {
				t.Errorf("stream %s after its result: %s, %v", id, line(f), err)
				break
			}
		}
	}
}

// TestCallRunner_FailureAnswersRunningCalls: when the runner fails, the
// calls running on tool actors get error results, since the restarted
// runner knows none of them.
func TestCallRunner_FailureAnswersRunningCalls(t *testing.T) {
	slow := tools.MustNew(tools.Definition{Name: "slow", Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}})
	spec, err := tools.NewCallRunner(&tools.RouterOptions{Tools: []*tools.Tool{slow}})
	if err != nil {
		t.Fatal(err)
	}
	var r actorstest.Recorder
	l := spec.New()
	for _, msg := range []any{actors.Started{}, messages.ToolCall("s", "c1", "slow", raw(`{}`))} {
		if err := r.Deliver(l, msg); err != nil {
			t.Fatal(err)
		}
	}
	if len(r.Sent) != 1 || r.Sent[0].Frame.GetToolCallId() != "c1" || len(r.Emitted) != 0 {
		t.Fatalf("the call went to %d actors, %d frames emitted", len(r.Sent), len(r.Emitted))
	}
	l.(actors.FailureHandler).OnFailure(&r, errors.New("boom"))
	if len(r.Emitted) != 1 || tools.KindOf(r.Emitted[0]) != tools.FailureStopped || r.Emitted[0].GetToolCallId() != "c1" {
		t.Fatalf("after the failure: %q, want one stopped result for c1", lines(r.Emitted))
	}
	// The tool's own late answer is not delivered a second time.
	late := actors.ChildFrame{Child: r.Sent[0].To, Frame: messages.RawToolResult("s", "c1", "slow", raw(`{}`))}
	if err := r.Deliver(l, late); err != nil {
		t.Fatal(err)
	}
	if len(r.Emitted) != 1 {
		t.Errorf("a late result went out again: %q", lines(r.Emitted))
	}
}

func TestCallRunner_RejectsDurability(t *testing.T) {
	_, err := tools.NewCallRunner(&tools.RouterOptions{Durability: &tools.DurabilityOptions{}})
	if err == nil {
		t.Fatal("a call runner took durability options")
	}
}
