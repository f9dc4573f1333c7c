package inspect_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/inspect"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// askEcho holds every call for a person.
func askEcho(tools.ApprovalCall) (tools.Verdict, string) {
	return tools.VerdictAsk, "echo needs a person"
}

// awaitApproval reads stream's frames until the loop asks for approval.
func (r *rig) awaitApproval(t *testing.T, stream string) tools.ApprovalRequest {
	t.Helper()
	for {
		f, err := r.conn.Recv(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if f.GetStreamId() == stream && f.GetType() == messages.FrameType_META && f.GetName() == tools.MetaApprovalRequired {
			var req tools.ApprovalRequest
			if err := json.Unmarshal(f.GetPayload(), &req); err != nil {
				t.Fatal(err)
			}
			return req
		}
		if f.GetType() == messages.FrameType_END {
			t.Fatalf("%s ended without asking for approval", stream)
		}
	}
}

func feedHas(snap inspect.Snapshot, kind string, parts ...string) bool {
	for _, it := range snap.Feed {
		if it.Kind != kind {
			continue
		}
		all := true
		for _, p := range parts {
			all = all && strings.Contains(it.Text, p)
		}
		if all {
			return true
		}
	}
	return false
}

func TestApprovals_WaitingShownUntilAnswered(t *testing.T) {
	r := newApprovalRig(t, nil, actors.Spec{}, &tools.ApprovalOptions{Policy: askEcho, Deadline: time.Hour})

	// Approved: shown waiting, then gone with its result counted.
	r.ask(t, "s1", "echo seven")
	req := r.awaitApproval(t, "s1")
	snap := r.state(t, "s1")
	if len(snap.Sessions) != 1 || snap.Sessions[0].Approvals != 1 {
		t.Fatalf("sessions %+v, want s1 with one call awaiting approval", snap.Sessions)
	}
	if snap.Session == nil || len(snap.Session.Approvals) != 1 {
		t.Fatalf("session detail %+v, want one call awaiting approval", snap.Session)
	}
	w := snap.Session.Approvals[0]
	if w.ID != "call_1" || w.Tool != "echo" || w.Stream != "s1" || w.Args != `{"x":7}` || w.Reason != "echo needs a person" ||
		w.AgeMS < 0 || w.Age == "" || w.Deadline == nil || !w.Deadline.Equal(req.Deadline) {
		t.Fatalf("waiting call %+v, want call_1 of echo with the request's deadline %v", w, req.Deadline)
	}
	if !feedHas(snap, "approval", "echo call call_1 on s1 waits for approval: echo needs a person", "denied unless answered by") {
		t.Fatalf("feed %+v, want the call waiting", snap.Feed)
	}
	if _, page := r.get(t, "/?session=s1"); !strings.Contains(page, `data-approval="call_1"`) || !strings.Contains(page, "1 awaiting approval") {
		t.Fatalf("page without the waiting call:\n%s", page)
	}
	if tool(snap, "echo").Calls != 0 {
		t.Fatalf("echo ran before its approval: %+v", tool(snap, "echo"))
	}

	if err := r.conn.Send(tools.ApprovalFrame("s1", tools.ApprovalAnswer{ToolCallID: "call_1", Decision: tools.DecisionApprove})); err != nil {
		t.Fatal(err)
	}
	frames, err := r.conn.RecvStream(testCtx(t), "s1")
	if err != nil {
		t.Fatal(err)
	}
	if finalText(frames) != "done" {
		t.Fatalf("after the approval: %v", frames)
	}
	snap = r.state(t, "s1")
	if snap.Sessions[0].Approvals != 0 || len(snap.Session.Approvals) != 0 {
		t.Fatalf("still waiting after the approval: %+v %+v", snap.Sessions[0], snap.Session.Approvals)
	}
	if echo := tool(snap, "echo"); echo.Calls != 1 || echo.Failures != 0 {
		t.Fatalf("echo figures %+v, want the approved call's result", echo)
	}
	if last := snap.Session.Conversation[len(snap.Session.Conversation)-1]; last.Role != "tool" || !strings.Contains(last.Text, `{"x":7}`) {
		t.Fatalf("conversation %+v, want the call's result last", snap.Session.Conversation)
	}
	if !feedHas(snap, "approval", "echo call call_1 on s1 was approved and ran") {
		t.Fatalf("feed %+v, want the approval", snap.Feed)
	}

	// Denied: gone, its result a denial.
	r.ask(t, "s2", "echo seven")
	r.awaitApproval(t, "s2")
	if snap = r.state(t, "s2"); len(snap.Session.Approvals) != 1 {
		t.Fatalf("s2 %+v, want one call awaiting approval", snap.Session)
	}
	if err := r.conn.Send(tools.ApprovalFrame("s2", tools.ApprovalAnswer{ToolCallID: "call_1", Decision: tools.DecisionDeny})); err != nil {
		t.Fatal(err)
	}
	if _, err := r.conn.RecvStream(testCtx(t), "s2"); err != nil {
		t.Fatal(err)
	}
	snap = r.state(t, "s2")
	if len(snap.Session.Approvals) != 0 || !feedHas(snap, "approval", "echo call call_1 on s2 was denied") {
		t.Fatalf("after the denial: %+v, feed %+v", snap.Session.Approvals, snap.Feed)
	}
	if echo := tool(snap, "echo"); echo.Calls != 2 || echo.Kinds[string(tools.FailureDenied)] != 1 {
		t.Fatalf("echo figures %+v, want one denied call", echo)
	}
}

// With its tool wrapped (Options.Faults), an approved call leaves the
// waiting list as it starts, before its result.
func TestApprovals_ApprovedCallGoneAsItRuns(t *testing.T) {
	r := newApprovalRig(t, &inspect.Options{Faults: true}, actors.Spec{}, &tools.ApprovalOptions{Policy: askEcho})
	if code, body := r.post(t, "/api/fault/stall", map[string][]string{"tool": {"echo"}, "on": {"true"}}, nil); code != 200 {
		t.Fatalf("stall: %d %s", code, body)
	}
	ev := r.events(t, "?session=s1")
	r.ask(t, "s1", "echo seven")
	if req := r.awaitApproval(t, "s1"); !req.Deadline.IsZero() {
		t.Fatalf("request %+v, want no deadline", req)
	}
	snap := r.state(t, "s1")
	if len(snap.Session.Approvals) != 1 || snap.Session.Approvals[0].Deadline != nil {
		t.Fatalf("waiting %+v, want call_1 without a deadline", snap.Session.Approvals)
	}
	if err := r.conn.Send(tools.ApprovalFrame("s1", tools.ApprovalAnswer{ToolCallID: "call_1", Decision: tools.DecisionApprove})); err != nil {
		t.Fatal(err)
	}
	snap = ev.until("the approved call running, stalled", func(s inspect.Snapshot) bool {
		return tool(s, "echo").Waiting == 1 && s.Session != nil && len(s.Session.Approvals) == 0
	})
	if !feedHas(snap, "approval", "echo call call_1 on s1 was approved: it runs") {
		t.Fatalf("feed %+v, want the approval", snap.Feed)
	}
	if code, body := r.post(t, "/api/fault/stall", map[string][]string{"tool": {"echo"}, "on": {"false"}}, nil); code != 200 {
		t.Fatalf("release: %d %s", code, body)
	}
	frames, err := r.conn.RecvStream(testCtx(t), "s1")
	if err != nil {
		t.Fatal(err)
	}
	if finalText(frames) != "done" {
		t.Fatalf("after the approval: %v", frames)
	}
}
