package agent_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// resultKinds records the failure kind ("ok" for a success) of every
// tool result the loop gives, by call id.
type resultKinds struct {
	mu    sync.Mutex
	kinds map[string][]string
}

func (r *resultKinds) record(ev tools.ToolResultEvent) {
	kind := "ok"
	if ev.Result.IsErrorResult() {
		kind = ev.Result.GetMeta().GetFailureKind()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kinds == nil {
		r.kinds = map[string][]string{}
	}
	r.kinds[ev.Call.GetToolCallId()] = append(r.kinds[ev.Call.GetToolCallId()], kind)
}

func (r *resultKinds) of(id string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.kinds[id])
}

// waitingSession starts an agent without a Store whose session s1 waits
// for approval of the launch call c2; results records the kinds of the
// results its tool calls get.
func waitingSession(t *testing.T) (*agent.Agent, *launcher, *resultKinds) {
	t.Helper()
	rt := actorstest.NewRuntime(t, nil)
	l := newLauncher()
	results := &resultKinds{}
	a := newAgent(t, rt, approvalScript(t).Spec("model"), &agent.Options{Tools: []*tools.Tool{echo(nil), l.tool()},
		Approval: &tools.ApprovalOptions{}, OnToolResult: results.record})
	_, err := a.Run(testCtx(t), "s1", ask)
	waiting(t, err, "c2")
	return a, l, results
}

// TestApproval_DiscardReleasesWaitingSession: without a Store, Discard
// answers the held call as cancelled (its one result; it never runs),
// releases the session's stream (the id can run again) and forgets it:
// Waiting no longer lists it, and a Resume names it as not waiting.
func TestApproval_DiscardReleasesWaitingSession(t *testing.T) {
	a, l, results := waitingSession(t)
	if got := a.Waiting(); !slices.Equal(got, []string{"s1"}) {
		t.Fatalf("waiting sessions %v, want [s1]", got)
	}
	if err := a.Discard(testCtx(t), "s1"); err != nil {
		t.Fatal(err)
	}
	if got := a.Waiting(); len(got) != 0 {
		t.Fatalf("waiting sessions after Discard %v", got)
	}
	if got := results.of("c2"); !slices.Equal(got, []string{string(tools.FailureCancelled)}) || l.runs.Load() != 0 {
		t.Fatalf("held call's results %v, %d launches", got, l.runs.Load())
	}
	_, err := a.Resume(testCtx(t), "s1", ask, agent.Approve("c2"))
	if !errors.Is(err, agent.ErrNotWaiting) || !strings.Contains(err.Error(), `"s1"`) {
		t.Fatalf("Resume of a discarded session: %v", err)
	}
	if err := a.Discard(testCtx(t), "s1"); !errors.Is(err, agent.ErrNotWaiting) {
		t.Fatalf("second Discard: %v", err)
	}
	// The stream was released: the session id starts a new conversation.
	_, err = a.Run(testCtx(t), "s1", ask)
	waiting(t, err, "c2")
	if l.runs.Load() != 0 {
		t.Fatalf("%d launches", l.runs.Load())
	}
}

// TestApproval_DiscardAfterDeadline: a session whose deadline passed (the
// loop went on and ended the conversation, queued on the waiting stream)
// is discarded at once: what the loop said is dropped with the stream.
func TestApproval_DiscardAfterDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		var results resultKinds
		a := newAgent(t, rt, approvalScript(t).Spec("model"), &agent.Options{Tools: []*tools.Tool{echo(nil), newLauncher().tool()},
			Approval: &tools.ApprovalOptions{Deadline: time.Hour}, OnToolResult: results.record})
		ctx, cancel := context.WithTimeout(context.Background(), 24*time.Hour)
		defer cancel()
		_, err := a.Run(ctx, "s1", ask)
		waiting(t, err, "c2")
		time.Sleep(time.Hour + time.Minute) // the fake clock passes the deadline
		synctest.Wait()                     // and the loop has ended the conversation
		start := time.Now()
		if err := a.Discard(ctx, "s1"); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("Discard waited %v", waited)
		}
		if got := a.Waiting(); len(got) != 0 {
			t.Fatalf("waiting sessions after Discard %v", got)
		}
		if got := results.of("c2"); !slices.Equal(got, []string{string(tools.FailureDenied)}) {
			t.Fatalf("held call's results %v, want the deadline's denial only", got)
		}
	})
}

// TestApproval_DiscardRefused: Discard of a session that does not wait
// names it; with a Store nothing waits in memory.
func TestApproval_DiscardRefused(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	a := newAgent(t, rt, approvalScript(t).Spec("model"), &agent.Options{Tools: []*tools.Tool{echo(nil), newLauncher().tool()},
		Approval: &tools.ApprovalOptions{}})
	if err := a.Discard(testCtx(t), "s9"); !errors.Is(err, agent.ErrNotWaiting) || !strings.Contains(err.Error(), `"s9"`) {
		t.Fatalf("Discard of a session that never ran: %v", err)
	}
	store := memstore.New(nil)
	defer store.Close()
	d := newAgent(t, rt, approvalScript(t).Spec("model"), &agent.Options{Tools: []*tools.Tool{echo(nil), newLauncher().tool()},
		Approval: &tools.ApprovalOptions{}, Store: store})
	_, err := d.Run(testCtx(t), "s1", ask)
	waiting(t, err, "c2")
	if got := d.Waiting(); len(got) != 0 {
		t.Fatalf("a durable agent lists %v as waiting in memory", got)
	}
	if err := d.Discard(testCtx(t), "s1"); err == nil || !strings.Contains(err.Error(), `"s1"`) {
		t.Fatalf("Discard of a durable session: %v", err)
	}
}

// TestApproval_CloseDropsWaiting: Close releases the sessions waiting
// without a Store, the held call never runs, and a Resume then fails as
// the agent is closed.
func TestApproval_CloseDropsWaiting(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	l := newLauncher()
	a := newAgent(t, rt, approvalScript(t).Spec("model"), &agent.Options{Tools: []*tools.Tool{echo(nil), l.tool()},
		Approval: &tools.ApprovalOptions{}})
	_, err := a.Run(testCtx(t), "s1", ask)
	waiting(t, err, "c2")
	if err := a.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if got := a.Waiting(); len(got) != 0 {
		t.Fatalf("waiting sessions after Close %v", got)
	}
	if _, err := a.Resume(testCtx(t), "s1", ask, agent.Approve("c2")); !errors.Is(err, agent.ErrClosed) {
		t.Fatalf("Resume after Close: %v", err)
	}
	if l.runs.Load() != 0 {
		t.Fatalf("%d launches", l.runs.Load())
	}
}

// TestApprovalDurable_ResumeRunsEachCallOnce: with a Store, the call of
// the waiting round that ran before the wait is not run again by the
// Resume (its stored result is reused), and the approved call runs once.
func TestApprovalDurable_ResumeRunsEachCallOnce(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	store := memstore.New(nil)
	defer store.Close()
	var echoes atomic.Int64
	l := newLauncher()
	a := newAgent(t, rt, approvalScript(t).Spec("model"), &agent.Options{Tools: []*tools.Tool{echo(&echoes), l.tool()},
		Approval: &tools.ApprovalOptions{}, Store: store})
	_, err := a.Run(testCtx(t), "s1", ask)
	waiting(t, err, "c2")
	ans, err := a.Resume(testCtx(t), "s1", ask, agent.Approve("c2"))
	if err != nil {
		t.Fatal(err)
	}
	if r := resultOf(t, ans, "c1"); ans.Text != "Done." || r.IsError || echoes.Load() != 1 || l.runs.Load() != 1 {
		t.Fatalf("answer %q, echo result %+v, %d echoes, %d launches", ans.Text, r, echoes.Load(), l.runs.Load())
	}
}

// TestApproval_ResumeWithEndedCtxKeepsWaiting: without a Store, a Resume
// whose ctx has already ended returns ctx's error and leaves the session
// waiting as it was (each try: the loop started, the ended ctx must not
// win a race against it): Waiting lists it, nothing of it ran or was
// answered, and a later Resume runs the held call once to the answer.
func TestApproval_ResumeWithEndedCtxKeepsWaiting(t *testing.T) {
	a, l, results := waitingSession(t)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for try := range 20 {
		if _, err := a.Resume(ended, "s1", ask, agent.Approve("c2")); !errors.Is(err, context.Canceled) {
			t.Fatalf("try %d: Resume with an ended ctx: %v, want context.Canceled", try, err)
		}
		if got := a.Waiting(); !slices.Equal(got, []string{"s1"}) {
			t.Fatalf("try %d: waiting sessions %v, want [s1]", try, got)
		}
	}
	if _, err := a.Run(testCtx(t), "s1", ask); !errors.Is(err, agent.ErrWaiting) {
		t.Fatalf("a Run of the session still waiting: %v", err)
	}
	ans, err := a.Resume(testCtx(t), "s1", ask, agent.Approve("c2"))
	if err != nil || ans.Text != "Done." {
		t.Fatalf("Resume: %v, %+v", err, ans)
	}
	if got := results.of("c2"); !slices.Equal(got, []string{"ok"}) || l.runs.Load() != 1 {
		t.Fatalf("results of the held call %v, %d launches; want one ok result, one launch", got, l.runs.Load())
	}
}

// TestDiscard_ErrorClipsLongSessionID: the errors of Discard name the
// session as every error of the agent does, a long id clipped, not in
// its up to MaxSessionIDBytes bytes.
func TestDiscard_ErrorClipsLongSessionID(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	a := newAgent(t, rt, model(t, scripted.Turn{Text: "x"}), &agent.Options{Store: store})
	id := strings.Repeat("s", agent.MaxSessionIDBytes)
	err := a.Discard(context.Background(), id)
	if err == nil || len(err.Error()) > 400 {
		t.Fatalf("Discard of a durable session of a %d-byte id: %d-byte error %v", len(id), len(err.Error()), err)
	}
}
