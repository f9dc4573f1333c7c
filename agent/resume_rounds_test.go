package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/boltstore"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// The tests of this file check that the answer of a Run that resumes a
// durable session holds the whole conversation: the rounds done before
// (in an earlier Run, an earlier process, an earlier attempt), each once
// and with what the model said in it.

// roundsScript: round 1 echoes (c1), round 2 calls "hold" (c2), then the
// final answer. Turns are picked by conversation, so a resumed request
// gets the right one.
func roundsScript() scripted.Script {
	return scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
		{Text: "Checking.", ToolCalls: []scripted.ToolCall{call("c1", "echo", `{"text":"hi"}`)}},
		{Text: "Holding.", ToolCalls: []scripted.ToolCall{call("c2", "hold", `{}`)}},
		{Text: "All done."},
	}}
}

// holdTool blocks until its ctx ends, and says when it started.
func holdTool(started chan<- struct{}) *tools.Tool {
	return tools.MustNew(tools.Definition{Name: "hold", Timeout: tools.NoTimeout,
		Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
			started <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		}})
}

func roundsAgent(t *testing.T, rt *actors.Runtime, store durability.Store, started chan<- struct{}, echoes *atomic.Int64) (*agent.Agent, error) {
	t.Helper()
	m, err := scripted.New(roundsScript(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return agent.New(rt, m.Spec("model"), &agent.Options{Name: "rounds", Store: store,
		Tools: []*tools.Tool{echo(echoes), holdTool(started)}})
}

// describe writes the rounds of ans as "text: id=content, ...; ..." (a
// result's failure kind in brackets instead of its content).
func describe(ans *models.Answer) string {
	if ans == nil {
		return "<nil answer>"
	}
	var b strings.Builder
	for i, r := range ans.Rounds {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%q:", r.Text)
		for j, c := range r.Calls {
			fmt.Fprintf(&b, " %s %s=", c.ID, c.Name)
			switch {
			case j >= len(r.Results):
				b.WriteString("<none>")
			case r.Results[j].CallID != c.ID:
				fmt.Fprintf(&b, "<result of %s>", r.Results[j].CallID)
			case r.Results[j].FailureKind != "":
				fmt.Fprintf(&b, "[%s]", r.Results[j].FailureKind)
			default:
				b.Write(r.Results[j].Content)
			}
		}
	}
	return b.String()
}

// wantRounds stops t unless ans has the rounds want (see describe).
func wantRounds(t *testing.T, what string, ans *models.Answer, want string) {
	t.Helper()
	if got := describe(ans); got != want {
		t.Fatalf("%s: rounds\n%s\nwant\n%s", what, got, want)
	}
}

// TestRun_ResumedInNewProcessHoldsEarlierRounds: a process stopped
// during round 2 (its runtime closed under the Run); a new process
// resumes the session with the same Name and messages: c1 does not run
// again, c2 is answered as interrupted, and the answer holds both rounds
// with what the model said in each, then the final text.
func TestRun_ResumedInNewProcessHoldsEarlierRounds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.db")
	var echoes atomic.Int64
	stopDuringHold(t, path, func(rt *actors.Runtime, store durability.Store, started chan<- struct{}) (*agent.Agent, error) {
		return roundsAgent(t, rt, store, started, &echoes)
	})
	store, err := boltstore.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	rt := actorstest.NewRuntime(t, nil)
	a, err := roundsAgent(t, rt, store, make(chan struct{}, 1), &echoes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	ans, err := a.Run(testCtx(t), "session-1", ask)
	if err != nil {
		t.Fatal(err)
	}
	if ans.Text != "All done." || echoes.Load() != 1 {
		t.Fatalf("answer %q, echo ran %d times", ans.Text, echoes.Load())
	}
	wantRounds(t, "resumed Run", ans, `"Checking.": c1 echo={"echo":"hi"}; "Holding.": c2 hold=[interrupted]`)
	// The session has ended: a Run of it again answers from the store,
	// with the whole conversation.
	again, err := a.Run(testCtx(t), "session-1", ask)
	if err != nil || again.Text != "All done." || !again.Answered {
		t.Fatalf("ended session: %+v, %v", again, err)
	}
	wantRounds(t, "ended session", again, `"Checking.": c1 echo={"echo":"hi"}; "Holding.": c2 hold=[interrupted]`)
	if got, want := string(again.Rounds[1].Results[0].Content), string(ans.Rounds[1].Results[0].Content); got != want {
		t.Errorf("ended session: c2's result %s, want %s", got, want)
	}
}

// stopDuringHold runs a process that stops during a call of "hold": in
// a runtime of its own, the agent newAgent makes (on the bbolt store at
// path, its hold tool saying on started when it starts) runs session-1
// with ask until its hold tool starts, and then the runtime is closed
// under the Run, which nothing waits for.
func stopDuringHold(t *testing.T, path string, newAgent func(*actors.Runtime, durability.Store, chan<- struct{}) (*agent.Agent, error)) {
	t.Helper()
	store, err := boltstore.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rt, err := actors.NewRuntime(nil)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 1)
	a, err := newAgent(rt, store, started)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := a.Run(testCtx(t), "session-1", ask); done <- err }()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("the Run of the first process ended before hold started: %v", err)
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	_ = rt.Close(gone) // the process goes: nothing waits for the call
	if err := <-done; err == nil {
		t.Fatal("the Run of the stopped process answered")
	}
	_ = a.Close(context.Background())
}

// TestRun_ResumedAfterCancelHoldsEarlierRounds: in one process, a Run
// cancelled while c2 runs, then a Run again: the answer holds both rounds
// (round 2 with the cancelled result the first Run saw), each once.
func TestRun_ResumedAfterCancelHoldsEarlierRounds(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	rt := actorstest.NewRuntime(t, nil)
	started := make(chan struct{}, 1)
	var echoes atomic.Int64
	a, err := roundsAgent(t, rt, store, started, &echoes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	ctx, cancel := context.WithCancel(testCtx(t))
	go func() { <-started; cancel() }()
	first, err := a.Run(ctx, "session-1", ask)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Run: %v", err)
	}
	wantRounds(t, "cancelled Run", first, `"Checking.": c1 echo={"echo":"hi"}; "Holding.": c2 hold=[cancelled]`)
	ans, err := a.Run(testCtx(t), "session-1", ask)
	if err != nil {
		t.Fatal(err)
	}
	if ans.Text != "All done." || echoes.Load() != 1 {
		t.Fatalf("answer %q, echo ran %d times", ans.Text, echoes.Load())
	}
	wantRounds(t, "resumed Run", ans, `"Checking.": c1 echo={"echo":"hi"}; "Holding.": c2 hold=[cancelled]`)
	again, err := a.Run(testCtx(t), "session-1", ask)
	if err != nil || again.Text != "All done." || !again.Answered {
		t.Fatalf("ended session: %+v, %v", again, err)
	}
	wantRounds(t, "ended session", again, `"Checking.": c1 echo={"echo":"hi"}; "Holding.": c2 hold=[cancelled]`)
	if got, want := string(again.Rounds[1].Results[0].Content), string(first.Rounds[1].Results[0].Content); got != want {
		t.Errorf("ended session: c2's result %s, want %s as the cancelled Run got it", got, want)
	}
}

// TestStream_ResumedRoundSaysItsText: a Stream that resumes a session
// stopped during round 2 (a cancelled Run) gives what the model said in
// that round, which the loop does not send again, as an EventText before
// the round's calls: the events say what the answer holds. Its frame is
// one of the attempt's stream, so that a host folding the events' frames
// into a models.Answer gets the round's text too.
func TestStream_ResumedRoundSaysItsText(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	rt := actorstest.NewRuntime(t, nil)
	started := make(chan struct{}, 1)
	a, err := roundsAgent(t, rt, store, started, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	ctx, cancel := context.WithCancel(testCtx(t))
	go func() { <-started; cancel() }()
	if _, err := a.Run(ctx, "session-1", ask); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Run: %v", err)
	}

	var said []string // the texts, and the calls as "call <id>"
	var ans *models.Answer
	folded := &models.Answer{}
	for ev, err := range a.Stream(testCtx(t), "session-1", ask) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Kind {
		case agent.EventText:
			said = append(said, ev.Text)
			if ev.Frame == nil || ev.Frame.GetType() != messages.FrameType_TEXT || ev.Frame.GetText() != ev.Text ||
				ev.Frame.GetStreamId() != agent.StreamID("session-1", 1) {
				t.Errorf("text event %q with frame %v", ev.Text, ev.Frame)
			}
		case agent.EventToolCall:
			said = append(said, "call "+ev.Call.ID)
		case agent.EventDone:
			ans = ev.Answer
		}
		if ev.Frame != nil {
			folded.Add(ev.Frame)
		}
	}
	if got, want := strings.Join(said, " | "), "Holding. | call c2 | All done."; got != want {
		t.Errorf("the resumed Stream said %q, want %q", got, want)
	}
	wantRounds(t, "answer", ans, `"Checking.": c1 echo={"echo":"hi"}; "Holding.": c2 hold=[cancelled]`)
	wantRounds(t, "the events' frames", folded, `"Holding.": c2 hold=[cancelled]`)
	if folded.Text != ans.Text {
		t.Errorf("the events' frames answer %q, the Stream %q", folded.Text, ans.Text)
	}
}

// TestResume_DurableRoundKeepsItsText: a durable Resume after approval
// gives the held round what the model said along with its calls.
func TestResume_DurableRoundKeepsItsText(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	rt := actorstest.NewRuntime(t, nil)
	dir := t.TempDir()
	a, err := durableAgent(rt, store, dir, &tools.ApprovalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	held, err := a.Run(testCtx(t), "session-1", ask)
	waiting(t, err, "c2")
	if len(held.Rounds) > 0 && held.Rounds[0].Text != "Echo and launch." {
		t.Errorf("waiting Run: round text %q", held.Rounds[0].Text)
	}
	ans, err := a.Resume(testCtx(t), "session-1", ask, agent.Approve("c2"))
	if err != nil {
		t.Fatal(err)
	}
	if ans.Text != "Done." || launched(t, dir) != "moon\n" {
		t.Fatalf("answer %q, launched %q", ans.Text, launched(t, dir))
	}
	wantRounds(t, "Resume", ans, `"Echo and launch.": c1 echo={"echo":"hi"} c2 launch={"launched":"moon"}`)
}

// TestRun_DurableRetryKeepsRoundText: with a Store, the model fails
// after saying "Checking." and calling c1 (which then never runs); the
// next attempt resumes the stored session, which answers c1 as
// interrupted: the answer holds that round once, with its text.
func TestRun_DurableRetryKeepsRoundText(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "Run", true: "Stream"}[stream], func(t *testing.T) {
			store := memstore.New(nil)
			t.Cleanup(func() { store.Close() })
			rt := actorstest.NewRuntime(t, nil)
			var echoes atomic.Int64
			a := newAgent(t, rt, model(t,
				scripted.Turn{Text: "Checking.", ToolCalls: []scripted.ToolCall{call("c1", "echo", `{"text":"hi"}`)},
					Error: "the model went away"},
				scripted.Turn{Text: "All done."},
			), &agent.Options{Name: "rounds", Store: store, Tools: []*tools.Tool{echo(&echoes)}, MaxAttempts: 2})
			var ans *models.Answer
			var err error
			restarts := 0
			var last *models.Answer // the last attempt's events' frames
			if stream {
				for ev, evErr := range a.Stream(testCtx(t), "session-1", ask) {
					ans, err = ev.Answer, evErr
					if ev.Kind == agent.EventRestart {
						restarts++
						// c1's round did not end: the next attempt gives it again.
						if got := describe(ev.Answer); got != "" {
							t.Errorf("restart: kept rounds %s, want none", got)
						}
						last = &models.Answer{}
					}
					if last != nil && ev.Frame != nil {
						last.Add(ev.Frame)
					}
				}
			} else {
				ans, err = a.Run(testCtx(t), "session-1", ask)
			}
			if err != nil {
				t.Fatal(err)
			}
			if stream && restarts != 1 {
				t.Errorf("%d restarts, want 1", restarts)
			}
			if ans.Text != "All done." || echoes.Load() != 0 {
				t.Fatalf("answer %q, echo ran %d times", ans.Text, echoes.Load())
			}
			wantRounds(t, "answer", ans, `"Checking.": c1 echo=[interrupted]`)
			if stream {
				// The rounds kept at the restart (none), then what the
				// resuming attempt's events say: the whole answer.
				wantRounds(t, "the resuming attempt's events", last, `"Checking.": c1 echo=[interrupted]`)
			}
		})
	}
}

// TestRun_EndedSessionAnswersWholeConversation: a Run of a session that
// has ended answers from the store with every round it made, what the
// model said in each included, not the final text alone. The first
// request starts with a system message the same as the agent's system
// prompt, so that the stored conversation starts with two of them.
func TestRun_EndedSessionAnswersWholeConversation(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	rt := actorstest.NewRuntime(t, nil)
	var echoes atomic.Int64
	m := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
		{Text: "Checking.", ToolCalls: []scripted.ToolCall{call("c1", "echo", `{"text":"hi"}`)}},
		{ToolCalls: []scripted.ToolCall{call("c2", "echo", `{"text":"<b> & \"c\""}`), call("c3", "echo", `{"text":"3"}`)}},
		{Text: "All done."},
	}}, nil)
	a := newAgent(t, rt, m.Spec("model"), &agent.Options{Name: "rounds", Store: store, Tools: []*tools.Tool{echo(&echoes)},
		SystemPrompt: "Be brief."})
	msgs := []models.Message{models.SystemMessage("Be brief."), models.UserMessage("Echo three times.")}
	first, err := a.Run(testCtx(t), "session-1", msgs)
	if err != nil {
		t.Fatal(err)
	}
	want := `"Checking.": c1 echo={"echo":"hi"}; "": c2 echo={"echo":"<b> & \"c\""} c3 echo={"echo":"3"}`
	wantRounds(t, "first Run", first, want)
	again, err := a.Run(testCtx(t), "session-1", msgs)
	if err != nil || again.Text != "All done." || !again.Answered || echoes.Load() != 3 || len(m.Requests()) != 3 {
		t.Fatalf("ended session: %+v, %v; echo ran %d times, the model got %d requests", again, err, echoes.Load(), len(m.Requests()))
	}
	wantRounds(t, "ended session", again, want)
	for i, r := range again.Rounds {
		for j, c := range r.Calls {
			if c.Index != j || string(c.Arguments) != string(first.Rounds[i].Calls[j].Arguments) || r.Results[j].Name != "echo" {
				t.Errorf("ended session: round %d call %d %+v, result %+v; want them as the first Run got them", i, j, c, r.Results[j])
			}
		}
	}
}

// failingReads is a store whose snapshot reads of name fail while fail
// is set.
type failingReads struct {
	durability.Store
	name string
	fail atomic.Bool
}

var errReadInjected = errors.New("injected: read failed")

func (s *failingReads) GetSnapshot(ctx context.Context, name string) (durability.Snapshot, bool, error) {
	if name == s.name && s.fail.Load() {
		return durability.Snapshot{}, false, errReadInjected
	}
	return s.Store.GetSnapshot(ctx, name)
}

// TestRun_StoreReadFailsBeforeRun: a durable Run whose session cannot be
// read from the store fails at once with the store's error, having sent
// nothing.
func TestRun_StoreReadFailsBeforeRun(t *testing.T) {
	mem := memstore.New(nil)
	t.Cleanup(func() { mem.Close() })
	store := &failingReads{Store: mem, name: agent.SessionKey("rounds", "session-1")}
	store.fail.Store(true)
	rt := actorstest.NewRuntime(t, nil)
	m := scripted.MustNew(roundsScript(), nil)
	a := newAgent(t, rt, m.Spec("model"), &agent.Options{Name: "rounds", Store: store, Tools: []*tools.Tool{echo(nil)}})
	_, err := a.Run(testCtx(t), "session-1", ask)
	if !errors.Is(err, errReadInjected) || len(m.Requests()) != 0 {
		t.Fatalf("Run: %v, the model got %d requests; want the read's error and none", err, len(m.Requests()))
	}
}

// TestRun_StoreReadFailsBeforeRetry: a read of the session that fails
// between two attempts does not fail the Run: the next attempt resumes
// on the loop that holds the session, and the answer keeps the rounds
// the failed attempt completed.
func TestRun_StoreReadFailsBeforeRetry(t *testing.T) {
	mem := memstore.New(nil)
	t.Cleanup(func() { mem.Close() })
	store := &failingReads{Store: mem, name: agent.SessionKey("rounds", "session-1")}
	rt := actorstest.NewRuntime(t, nil)
	var echoes atomic.Int64
	m := scripted.MustNew(scripted.Script{Select: scripted.BySequence, Turns: []scripted.Turn{
		{Text: "Checking.", ToolCalls: []scripted.ToolCall{call("c1", "echo", `{"text":"hi"}`)}},
		{Error: "the model went away"},
		{Text: "All done."},
	}}, nil)
	a := newAgent(t, rt, m.Spec("model"), &agent.Options{Name: "rounds", Store: store, Tools: []*tools.Tool{echo(&echoes)}, MaxAttempts: 2,
		// The loop has read the session: the next read is the agent's,
		// before the second attempt.
		OnToolResult: func(tools.ToolResultEvent) { store.fail.Store(true) }})
	ans, err := a.Run(testCtx(t), "session-1", ask)
	if err != nil {
		t.Fatal(err)
	}
	if ans.Text != "All done." || echoes.Load() != 1 {
		t.Fatalf("answer %q, echo ran %d times", ans.Text, echoes.Load())
	}
	wantRounds(t, "answer", ans, `"Checking.": c1 echo={"echo":"hi"}`)
}
