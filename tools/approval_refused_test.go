package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/tools/tooltest"
)

// heldLoop starts a loop whose model calls the irreversible nuke (c1,
// held for approval) then answers "ok", sends a request on s1 and reads
// up to the round's approval_waiting. It returns the connection and the
// channel nuke reports its runs on.
func heldLoop(t *testing.T, approval *tools.ApprovalOptions, session *tools.SessionOptions) (*actors.Conn, chan string) {
	t.Helper()
	ran := make(chan string, 4)
	nuke := tools.MustNew(tools.Definition{Name: "nuke", Irreversible: true, Capabilities: []string{"execute"},
		Handler: func(_ context.Context, args json.RawMessage) (any, error) { ran <- string(args); return nil, nil }})
	script := [][]*messages.Frame{{
		messages.ToolCall("", "c1", "nuke", raw(`{"x":1}`)),
		messages.End(""),
	}, {
		messages.Text("", "ok"), messages.End(""),
	}}
	spec, err := tools.NewLoop(tooltest.ScriptedModel("model", script, nil), &tools.LoopOptions{
		RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{nuke}},
		Approval:      approval,
		Session:       session,
	})
	if err != nil {
		t.Fatal(err)
	}
	conn := start(t, newRuntime(t), spec)
	if err := conn.SendAll(request("s1")...); err != nil {
		t.Fatal(err)
	}
	if got := lines(recvN(t, conn, 3)); !strings.HasPrefix(got[2], "META stream=s1 name=approval_waiting") {
		t.Fatalf("got %q, want c1 held", got)
	}
	return conn, ran
}

// refusalOf reads f as an approval_refused frame of stream s1.
func refusalOf(t *testing.T, f *messages.Frame) tools.ApprovalRefusal {
	t.Helper()
	var r tools.ApprovalRefusal
	if f.GetType() != messages.FrameType_META || f.GetName() != tools.MetaApprovalRefused || f.GetStreamId() != "s1" {
		t.Fatalf("got %s, want an approval_refused of s1", line(f))
	}
	if err := json.Unmarshal(f.GetPayload(), &r); err != nil {
		t.Fatalf("approval_refused %s: %v", f.GetPayload(), err)
	}
	return r
}

// TestLoopApproval_BadAnswersAreRefused: an approval frame the loop
// cannot apply (not JSON, an unknown decision, no call id, a call that
// does not wait) is answered at once with approval_refused saying why,
// followed by the round's approval_waiting, since the round still waits
// only for its held call; the held call is neither lost nor changed: it
// is still stored as held, and the approval that follows runs it once.
func TestLoopApproval_BadAnswersAreRefused(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	conn, ran := heldLoop(t, &tools.ApprovalOptions{}, &tools.SessionOptions{ID: "sess", Store: store})
	held, err := tools.ReadApprovals(store, "sess")
	if err != nil || len(held) != 1 {
		t.Fatalf("stored held calls %+v, %v; want c1", held, err)
	}
	for _, tc := range []struct {
		name   string
		frame  *messages.Frame
		id     string
		reason string
		is     error
	}{
		{"not JSON", messages.Meta("s1", tools.MetaApproval, raw(`not json`)), "", tools.RefusedInvalid, tools.ErrInvalidAnswer},
		{"unknown decision", tools.ApprovalFrame("s1", tools.ApprovalAnswer{ToolCallID: "c1", Decision: "maybe"}), "c1",
			tools.RefusedInvalid, tools.ErrInvalidAnswer},
		{"no call id", tools.ApprovalFrame("s1", tools.ApprovalAnswer{Decision: tools.DecisionApprove}), "",
			tools.RefusedInvalid, tools.ErrInvalidAnswer},
		{"unknown call", tools.ApprovalFrame("s1", tools.ApprovalAnswer{ToolCallID: "c9", Decision: tools.DecisionDeny}), "c9",
			tools.RefusedNotHeld, tools.ErrNotHeld},
	} {
		if err := conn.Send(tc.frame); err != nil {
			t.Fatal(err)
		}
		got := recvN(t, conn, 2)
		r := refusalOf(t, got[0])
		if r.ToolCallID != tc.id || r.Reason != tc.reason || r.Error == "" || !errors.Is(r.Err(), tc.is) ||
			!strings.Contains(r.Err().Error(), r.Error) {
			t.Errorf("%s: refused with %+v (error %v); want call %q, reason %q, an error wrapping %v", tc.name, r, r.Err(), tc.id, tc.reason, tc.is)
		}
		if w := line(got[1]); !strings.HasPrefix(w, "META stream=s1 name=approval_waiting") || !strings.Contains(w, `"tool_call_id":"c1"`) {
			t.Errorf("%s: then %s, want approval_waiting for c1", tc.name, w)
		}
	}
	if after, err := tools.ReadApprovals(store, "sess"); err != nil || !slices.EqualFunc(after, held, sameRequest) {
		t.Fatalf("stored held calls after the refusals %+v, %v; want %+v", after, err, held)
	}
	if len(ran) != 0 {
		t.Fatalf("nuke ran with %s", <-ran)
	}
	if err := conn.Send(tools.ApprovalFrame("s1", tools.ApprovalAnswer{ToolCallID: "c1", Decision: tools.DecisionApprove})); err != nil {
		t.Fatal(err)
	}
	rest, err := conn.RecvStream(testCtx(t), "s1")
	if err != nil {
		t.Fatalf("%v after %q", err, lines(rest))
	}
	if out := strings.Join(lines(rest), "\n"); !strings.Contains(out, "TOOL_RESULT stream=s1 id=c1 name=nuke payload={}") ||
		!strings.Contains(out, `TEXT stream=s1 text="ok"`) {
		t.Fatalf("after the approval:\n%s", out)
	}
	if len(ran) != 1 {
		t.Fatalf("nuke ran %d times, want once", len(ran))
	}
}

func sameRequest(a, b tools.ApprovalRequest) bool {
	return a.ToolCallID == b.ToolCallID && a.Tool == b.Tool && string(a.Arguments) == string(b.Arguments) &&
		a.Reason == b.Reason && a.Deadline.Equal(b.Deadline)
}

// TestLoopApproval_AnswersThatApplyToNothingAreAnsweredAtOnce: answers
// about no held call (the call was answered already, or never held) do
// not leave their sender waiting for the held call's deadline, an hour
// away: each is refused at once, and the round says again that it waits.
// The held call still has its deadline.
func TestLoopApproval_AnswersThatApplyToNothingAreAnsweredAtOnce(t *testing.T) {
	conn, ran := heldLoop(t, &tools.ApprovalOptions{Deadline: time.Hour}, nil)
	if err := conn.SendAll(
		tools.ApprovalFrame("s1", tools.ApprovalAnswer{ToolCallID: "c7", Decision: tools.DecisionApprove}),
		tools.ApprovalFrame("s1", tools.ApprovalAnswer{ToolCallID: "c8", Decision: tools.DecisionDeny})); err != nil {
		t.Fatal(err)
	}
	got := recvN(t, conn, 4)
	for i, id := range []string{"c7", "c8"} {
		if r := refusalOf(t, got[2*i]); r.ToolCallID != id || r.Reason != tools.RefusedNotHeld {
			t.Errorf("answer about %s refused with %+v, want reason %q", id, r, tools.RefusedNotHeld)
		}
		var w tools.ApprovalWaiting
		if got[2*i+1].GetName() != tools.MetaApprovalWaiting || json.Unmarshal(got[2*i+1].GetPayload(), &w) != nil ||
			len(w.Pending) != 1 || w.Pending[0].ToolCallID != "c1" || w.Pending[0].Deadline.IsZero() {
			t.Errorf("after the refusal of %s: %s, want approval_waiting for c1 with its deadline", id, line(got[2*i+1]))
		}
	}
	if len(ran) != 0 {
		t.Fatalf("nuke ran with %s", <-ran)
	}
	if err := conn.Send(messages.Abort("s1")); err != nil {
		t.Fatal(err)
	}
	if rest, err := conn.RecvStream(testCtx(t), "s1"); err != nil || !strings.Contains(strings.Join(lines(rest), "\n"), "cancelled while it waited for approval") {
		t.Fatalf("after ABORT: %q, %v", lines(rest), err)
	}
}

// TestLoopApproval_AnswerWithoutPolicyIsRefused: a loop without an
// approval policy holds nothing; an approval frame sent to it is refused,
// not dropped, and does not go to the model.
func TestLoopApproval_AnswerWithoutPolicyIsRefused(t *testing.T) {
	model := newSink()
	spec, err := tools.NewLoop(tooltest.ScriptedModel("model", nil, model.observe), nil)
	if err != nil {
		t.Fatal(err)
	}
	conn := start(t, newRuntime(t), spec)
	if err := conn.Send(tools.ApprovalFrame("s1", tools.ApprovalAnswer{ToolCallID: "c1", Decision: tools.DecisionApprove})); err != nil {
		t.Fatal(err)
	}
	r := refusalOf(t, recvN(t, conn, 1)[0])
	if r.ToolCallID != "c1" || r.Reason != tools.RefusedNoPolicy || !errors.Is(r.Err(), tools.ErrNoApprovalPolicy) {
		t.Errorf("refused with %+v (error %v), want reason %q wrapping ErrNoApprovalPolicy", r, r.Err(), tools.RefusedNoPolicy)
	}
	// The model's first frame is the next request's, not the answer.
	if err := conn.SendAll(request("s1")...); err != nil {
		t.Fatal(err)
	}
	if got := model.until(t, isEnd); got[0].GetType() == messages.FrameType_META {
		t.Errorf("the model got %s", line(got[0]))
	}
}
