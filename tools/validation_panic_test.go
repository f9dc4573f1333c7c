package tools_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// TestToolLogic_ValidationPanicIsTheCallsResult: on a tool's own actor, a
// panic while a call's arguments are validated is that call's one result
// (panicked, with its END), as when a dispatcher runs the call inline: the
// actor does not fail, and it serves the next call.
func TestToolLogic_ValidationPanicIsTheCallsResult(t *testing.T) {
	for _, sync := range []bool{false, true} {
		name := "async"
		if sync {
			name = "sync"
		}
		t.Run(name, func(t *testing.T) {
			var ranWith []string
			tool := tools.MustNew(tools.Definition{Name: "v", Sync: sync, Handler: func(_ context.Context, args json.RawMessage) (any, error) {
				ranWith = append(ranWith, string(args))
				return "ran", nil
			}})
			tools.BreakValidation(tool)
			var r actorstest.Recorder
			l := tool.Logic()
			if err := r.Deliver(l, messages.ToolCall("s", "c1", "v", raw(`{"a":1}`))); err != nil {
				t.Fatalf("the tool actor failed: %v", err)
			}
			if len(r.Emitted) != 2 || r.Emitted[0].GetToolCallId() != "c1" || tools.KindOf(r.Emitted[0]) != tools.FailurePanic ||
				!strings.Contains(r.Emitted[0].String(), "Tool v panicked") ||
				r.Emitted[1].GetType() != messages.FrameType_END || r.Emitted[1].GetToolCallId() != "c1" {
				t.Fatalf("emitted %q, want c1's panicked result and its END", lines(r.Emitted))
			}
			r.Reset()
			// The actor keeps serving: the next call runs.
			if err := r.Deliver(l, messages.ToolCall("s", "c2", "v", raw(`{}`))); err != nil {
				t.Fatalf("the tool actor failed: %v", err)
			}
			if !sync {
				if len(r.Jobs) != 1 {
					t.Fatalf("c2 started %d jobs, want 1", len(r.Jobs))
				}
				if err := r.Deliver(l, r.RunJob(context.Background(), 0)); err != nil {
					t.Fatal(err)
				}
			}
			if len(r.Emitted) != 2 || r.Emitted[0].GetToolCallId() != "c2" || tools.KindOf(r.Emitted[0]) != "" {
				t.Fatalf("emitted %q, want c2's result and its END", lines(r.Emitted))
			}
			if len(ranWith) != 1 || ranWith[0] != "{}" {
				t.Errorf("the handler ran with %q, want c2's arguments only", ranWith)
			}
		})
	}
}

// TestCallRunner_ValidationPanicOnToolActor: a call of an async tool whose
// validation panics on the tool's actor gets one panicked result, and the
// actor goes on: a call it was running meanwhile gets its own result, not
// a stopped one.
func TestCallRunner_ValidationPanicOnToolActor(t *testing.T) {
	rt := newRuntime(t)
	started, release := make(chan struct{}), make(chan struct{})
	tool := tools.MustNew(tools.Definition{Name: "v", Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
		close(started)
		select {
		case <-release:
			return "ran", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}})
	tools.BreakValidation(tool)
	spec, err := tools.NewCallRunner(&tools.RouterOptions{Tools: []*tools.Tool{tool}})
	if err != nil {
		t.Fatal(err)
	}
	conn := start(t, rt, spec)
	if err := conn.Send(messages.ToolCall("s0", "c0", "v", raw(`{}`))); err != nil {
		t.Fatal(err)
	}
	<-started
	if err := conn.Send(messages.ToolCall("s1", "c1", "v", raw(`{"a":1}`))); err != nil {
		t.Fatal(err)
	}
	got := untilResult(t, conn, "s1")
	close(release)
	got = append(got, untilResult(t, conn, "s0")...)
	got = append(got, drain(t, conn)...)
	results := map[string][]*messages.Frame{}
	for _, f := range got {
		switch f.GetType() {
		case messages.FrameType_TOOL_RESULT:
			results[f.GetToolCallId()] = append(results[f.GetToolCallId()], f)
		case messages.FrameType_ERROR:
			t.Errorf("a stream was left open: %s", line(f))
		}
	}
	if r := results["c1"]; len(r) != 1 || tools.KindOf(r[0]) != tools.FailurePanic {
		t.Errorf("c1: %q, want one panicked result; all frames: %q", lines(r), lines(got))
	}
	if r := results["c0"]; len(r) != 1 || tools.KindOf(r[0]) != "" {
		t.Errorf("c0: %q, want its handler's result; all frames: %q", lines(r), lines(got))
	}
}

// TestLoopApproval_EditedArgumentsValidationPanics: arguments a person
// edited whose validation panics deny the call (it is not run), as
// invalid ones do; the loop does not fail, and the round goes on. The
// panic is logged with its stack; a log handler that panics on that
// record loses the record, not the call's denial.
func TestLoopApproval_EditedArgumentsValidationPanics(t *testing.T) {
	for _, lc := range logCases {
		t.Run(lc.name, func(t *testing.T) { testEditedArgumentsValidationPanics(t, lc.breaks) })
	}
}

func testEditedArgumentsValidationPanics(t *testing.T, breaks bool) {
	ran := make(chan string, 4)
	nuke := tools.MustNew(tools.Definition{Name: "nuke", Irreversible: true,
		Handler: func(_ context.Context, args json.RawMessage) (any, error) { ran <- string(args); return nil, nil }})
	tools.BreakValidation(nuke)
	script := [][]*messages.Frame{{
		messages.ToolCall("", "c1", "nuke", raw(`{}`)),
		messages.End(""),
	}, {
		messages.Text("", "ok"), messages.End(""),
	}}
	rt, logs := loggedRuntime(t, breaks)
	conn := startLoop(t, rt, script, nil, &tools.LoopOptions{
		RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{nuke}},
		Approval:      &tools.ApprovalOptions{},
	}, request("s1"))
	if got := lines(recvN(t, conn, 3)); !strings.HasPrefix(got[2], "META stream=s1 name=approval_waiting") {
		t.Fatalf("got %q, want the call held", got)
	}
	if err := conn.Send(tools.ApprovalFrame("s1", tools.ApprovalAnswer{ToolCallID: "c1", Decision: tools.DecisionEdit,
		Arguments: raw(`{"a":1}`)})); err != nil {
		t.Fatal(err)
	}
	rest, err := conn.RecvStream(testCtx(t), "s1")
	if err != nil {
		t.Fatalf("%v after %q", err, lines(rest))
	}
	var results []*messages.Frame
	for _, f := range rest {
		switch f.GetType() {
		case messages.FrameType_TOOL_RESULT:
			results = append(results, f)
		case messages.FrameType_ERROR:
			t.Errorf("the loop failed: %s", line(f))
		}
	}
	if len(results) != 1 || tools.KindOf(results[0]) != tools.FailureDenied ||
		!strings.Contains(results[0].String(), "validating the arguments a person edited panicked") {
		t.Fatalf("results %q, want c1 denied; all frames: %q", lines(results), lines(rest))
	}
	if len(ran) != 0 {
		t.Errorf("nuke ran with %q", <-ran)
	}
	checkPanicLog(t, logs, "nuke", "validation", "(*validator).validate")
}
