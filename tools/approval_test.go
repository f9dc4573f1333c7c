package tools_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/tools/tooltest"
)

// TestLoopApproval_Frames: the loop asks about the irreversible call,
// runs the other one meanwhile, says the round waits, takes the answer
// off the request path (the model never sees it) and runs the approved
// call once, refusing the same approval sent again; an ABORT answers a
// held call as cancelled.
func TestLoopApproval_Frames(t *testing.T) {
	ran := make(chan string, 4)
	nuke := tools.MustNew(tools.Definition{Name: "nuke", Irreversible: true, Capabilities: []string{"execute"},
		Handler: func(_ context.Context, args json.RawMessage) (any, error) { ran <- string(args); return nil, nil }})
	script := [][]*messages.Frame{{
		messages.ToolCall("", "c1", "weather", raw(`{"city":"Paris"}`)),
		messages.ToolCall("", "c2", "nuke", raw(`{"x":1}`)),
		messages.End(""),
	}, {
		messages.Text("", "ok"), messages.End(""),
	}}
	rt := newRuntime(t)
	model := newSink()
	conn := startLoop(t, rt, script, model.observe, &tools.LoopOptions{
		RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{weather(), nuke}},
		Approval:      &tools.ApprovalOptions{},
	}, request("s1"))
	got := lines(recvN(t, conn, 4))
	want := []string{
		`TOOL_CALL stream=s1 id=c1 name=weather payload={"city":"Paris"}`,
		`TOOL_CALL stream=s1 id=c2 name=nuke payload={"x":1}`,
		`META stream=s1 name=approval_required payload={"tool_call_id":"c2","tool":"nuke","arguments":{"x":1},"reason":"nuke is irreversible"}`,
		`META stream=s1 name=approval_waiting payload={"pending":[{"tool_call_id":"c2","tool":"nuke","arguments":{"x":1},"reason":"nuke is irreversible"}]}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if err := conn.SendAll(tools.ApprovalFrame("s1", tools.ApprovalAnswer{ToolCallID: "c2", Decision: tools.DecisionApprove}),
		tools.ApprovalFrame("s1", tools.ApprovalAnswer{ToolCallID: "c2", Decision: tools.DecisionApprove})); err != nil {
		t.Fatal(err)
	}
	rest, err := conn.RecvStream(testCtx(t), "s1")
	if err != nil {
		t.Fatal(err)
	}
	if out := strings.Join(lines(rest), "\n"); !strings.Contains(out, `TOOL_RESULT stream=s1 id=c2 name=nuke payload={}`) || !strings.HasSuffix(out, "END stream=s1") {
		t.Fatalf("after the approval:\n%s", out)
	}
	// The second approval finds c2 no longer held: it is refused, before
	// the stream's END or after it.
	if !slices.ContainsFunc(rest, isRefusal) {
		if f := recvN(t, conn, 1)[0]; !isRefusal(f) {
			t.Fatalf("the second approval of c2 was answered with %s, want approval_refused", line(f))
		}
	}
	if len(ran) != 1 {
		t.Fatalf("nuke ran %d times", len(ran))
	}
	for _, f := range model.until(t, func(f *messages.Frame) bool { return len(model) == 0 }) {
		if f.GetType() == messages.FrameType_META {
			t.Fatalf("the model got %s", line(f))
		}
	}

	// A held call and ABORT (the script plays again on a new stream).
	if err := conn.SendAll(request("s2")...); err != nil {
		t.Fatal(err)
	}
	if got := lines(recvN(t, conn, 4)); !strings.HasPrefix(got[3], "META stream=s2 name=approval_waiting") {
		t.Fatalf("got %q", got)
	}
	if err := conn.Send(messages.Abort("s2")); err != nil {
		t.Fatal(err)
	}
	rest, err = conn.RecvStream(testCtx(t), "s2")
	if err != nil {
		t.Fatal(err)
	}
	if out := strings.Join(lines(rest), "\n"); !strings.Contains(out, "TOOL_RESULT stream=s2 id=c2 name=nuke") || !strings.Contains(out, "cancelled while it waited for approval") {
		t.Fatalf("after ABORT:\n%s", out)
	}
	if len(ran) != 1 {
		t.Fatalf("nuke ran %d times", len(ran))
	}
}

func isRefusal(f *messages.Frame) bool {
	return f.GetType() == messages.FrameType_META && f.GetName() == tools.MetaApprovalRefused
}

// TestLoopApproval_WaitingSaysDurable: a loop with a session store says
// in approval_waiting that the held calls are persisted (a stop leaves
// them to a later resume); without one the frame says nothing of it (see
// TestLoopApproval_Frames).
func TestLoopApproval_WaitingSaysDurable(t *testing.T) {
	nuke := tools.MustNew(tools.Definition{Name: "nuke", Irreversible: true, Capabilities: []string{"execute"},
		Handler: func(context.Context, json.RawMessage) (any, error) { return nil, nil }})
	script := [][]*messages.Frame{{messages.ToolCall("", "c1", "nuke", raw(`{}`)), messages.End("")}}
	store := memstore.New(nil)
	defer store.Close()
	spec, err := tools.NewLoop(tooltest.ScriptedModel("model", script, nil), &tools.LoopOptions{
		RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{nuke}},
		Approval:      &tools.ApprovalOptions{},
		Session:       &tools.SessionOptions{ID: "s", Store: store},
	})
	if err != nil {
		t.Fatal(err)
	}
	conn := start(t, newRuntime(t), spec)
	if err := conn.SendAll(request("s1")...); err != nil {
		t.Fatal(err)
	}
	for _, f := range recvN(t, conn, 3) {
		if f.GetType() != messages.FrameType_META || f.GetName() != tools.MetaApprovalWaiting {
			continue
		}
		var w tools.ApprovalWaiting
		if err := json.Unmarshal(f.GetPayload(), &w); err != nil || !w.Durable || len(w.Pending) != 1 {
			t.Fatalf("approval_waiting %s: %+v, %v; want the held call, durable", f.GetPayload(), w, err)
		}
		return
	}
	t.Fatal("no approval_waiting")
}
