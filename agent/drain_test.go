package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// The tests of a cancelled Run whose loop takes longer than CancelGrace
// to wind its conversation down run in a synctest bubble: the model's
// slowness and the grace are fake time, and synctest.Wait tells when
// every goroutine (the agent's, the runtime's, the test's Runs) waits.
const (
	drainGrace = time.Second // the agent's CancelGrace
	windDown   = time.Minute // how long the model takes to notice an ABORT
)

// slowToAbort is a scripted model adapter slow to notice a cancel: each
// ABORT reaches the script windDown after it came. over tells when one
// has. With lagEnd, the END that follows the script's ERROR answering
// the ABORT goes out endLag after that ERROR, and every frame the script
// emits meanwhile after it.
type slowToAbort struct {
	m      *scripted.Model
	over   atomic.Bool
	lagEnd bool
}

// endLag is how long slowToAbort with lagEnd holds an END back.
const endLag = time.Millisecond

// heldAbort is the timer key of an ABORT slowToAbort holds back;
// heldEnd the key of the END (and the frames after it) it holds back.
type (
	heldAbort struct{ f *messages.Frame }
	heldEnd   struct{}
)

func (s *slowToAbort) spec() actors.Spec {
	inner := s.m.Spec("model")
	return actors.Spec{Name: inner.Name, New: func() actors.Logic {
		l := inner.New()
		lag := &lagging{}
		return actors.LogicFunc(func(c actors.Context, msg any) {
			lag.Context = c
			switch m := msg.(type) {
			case *messages.Frame:
				if m.GetType() == messages.FrameType_ABORT {
					c.After(windDown, heldAbort{m})
					return
				}
			case actors.Timer:
				switch h := m.Key.(type) {
				case heldAbort:
					s.over.Store(true)
					lag.armed = s.lagEnd
					l.Receive(lag, h.f)
					lag.armed = false
					return
				case heldEnd:
					held := lag.held
					lag.held = nil
					for _, f := range held {
						c.Emit(f)
					}
					return
				}
			}
			l.Receive(lag, msg)
		})
	}}
}

// lagging is the context slowToAbort's script gets: while armed, the
// first END it emits is held back endLag, and so is every frame after it
// until then.
type lagging struct {
	actors.Context
	armed bool
	held  []*messages.Frame // nil: nothing held
}

func (l *lagging) Emit(f *messages.Frame) {
	switch {
	case l.held != nil:
		l.held = append(l.held, f)
	case l.armed && f.GetType() == messages.FrameType_END:
		l.armed = false
		l.held = []*messages.Frame{f}
		l.After(endLag, heldEnd{})
	default:
		l.Context.Emit(f)
	}
}

// slowModel answers a fresh conversation (A's) with text and then
// nothing until it is cancelled, and one holding an assistant message
// already (B's) with a round of echo and a final text of its own: each
// conversation's answer tells whose it is.
func slowModel(t *testing.T) *slowToAbort {
	t.Helper()
	m, err := scripted.New(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
		{Text: "A is working on it.", Stall: true},
		{Text: "B echoes.", ToolCalls: []scripted.ToolCall{call("b1", "echo", `{"text":"b"}`)}},
		{Text: "B's own answer."},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &slowToAbort{m: m}
}

// drainAgent starts an agent on rt with slowModel's model, the echo tool
// and CancelGrace drainGrace, inside the test's synctest bubble.
func drainAgent(t *testing.T) (*agent.Agent, *slowToAbort) {
	t.Helper()
	rt := actorstest.NewRuntime(t, nil)
	slow := slowModel(t)
	return newAgent(t, rt, slow.spec(), &agent.Options{Tools: []*tools.Tool{echo(nil)}, CancelGrace: drainGrace}), slow
}

var (
	askA = []models.Message{models.UserMessage("Task A: take your time.")}
	askB = []models.Message{models.UserMessage("Task B."), models.AssistantMessage("Noted."),
		models.UserMessage("Now answer B.")}
)

// cancelledMidAnswer streams A on session s1 and cancels it once the
// model has said something: by ending its ctx, or with stop by stopping
// the iteration (which cancels it too). A returns after CancelGrace,
// long before the model notices the ABORT, so the loop still works on
// A's conversation.
func cancelledMidAnswer(t *testing.T, a *agent.Agent, slow *slowToAbort, stop bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var err error
	for ev, evErr := range a.Stream(ctx, "s1", askA) {
		err = evErr
		if ev.Kind == agent.EventText {
			if stop {
				break
			}
			cancel()
		}
	}
	if !stop && !errors.Is(err, context.Canceled) {
		t.Fatalf("run A: %v, want context.Canceled", err)
	}
	if slow.over.Load() {
		t.Fatal("the model noticed the ABORT within the grace: the test tests nothing")
	}
}

// streamed is what a Stream gave: its events and its last error.
type streamed struct {
	events []agent.Event
	err    error
}

// streamOf streams the conversation msgs of session on a goroutine of its
// own and hands over what it gave once it has ended.
func streamOf(a *agent.Agent, session string, msgs []models.Message) <-chan streamed {
	done := make(chan streamed, 1)
	go func() {
		var out streamed
		for ev, err := range a.Stream(context.Background(), session, msgs) {
			out.events, out.err = append(out.events, ev), err
		}
		done <- out
	}()
	return done
}

// requestsOf returns the messages of each request the model got, as
// role:content strings.
func requestsOf(t *testing.T, m *scripted.Model) [][]string {
	t.Helper()
	var out [][]string
	for _, msgs := range requestMessages(t, m) {
		var got []string
		for _, msg := range msgs {
			got = append(got, msg.Role+":"+msg.Content)
		}
		out = append(out, got)
	}
	return out
}

// TestRun_CancelledPastGraceDrains: a Stream whose consumer stops while
// the model is slower than CancelGrace to notice the ABORT returns, and
// the next Run of its session, with another conversation, waits until
// the loop has ended the cancelled one: it gets exactly its own answer
// (its round of echo and its final text) in one attempt, none of the
// cancelled conversation's late frames (its ERROR, its END), and the
// model gets its requests as a conversation of its own.
func TestRun_CancelledPastGraceDrains(t *testing.T) {
	t.Run("END with its ERROR", func(t *testing.T) { testCancelledPastGraceDrains(t, false) })
	// The model sends the END of its answer to the ABORT a moment after
	// its ERROR: the loop ends A's stream when that END comes, and B's
	// request, sent as soon as A's stream ended, is not taken into A's
	// failed conversation (whose follow-up would lack B's messages, and
	// repeat B's first round).
	t.Run("END after its ERROR", func(t *testing.T) { testCancelledPastGraceDrains(t, true) })
}

func testCancelledPastGraceDrains(t *testing.T, lagEnd bool) {
	synctest.Test(t, func(t *testing.T) {
		a, slow := drainAgent(t)
		slow.lagEnd = lagEnd
		m := slow.m
		cancelledMidAnswer(t, a, slow, true)

		b := <-streamOf(a, "s1", askB)
		if b.err != nil {
			t.Fatalf("run B: %v", b.err)
		}
		for _, ev := range b.events {
			switch {
			case ev.Attempt > 1, ev.Kind == agent.EventRestart, ev.Kind == agent.EventError:
				t.Errorf("run B: %v event of attempt %d: %q", ev.Kind, ev.Attempt, ev.Text)
			case ev.Frame != nil && ev.Frame.GetToolCallId() != "" && ev.Frame.GetToolCallId() != "b1":
				t.Errorf("run B got A's %v frame of call %s", ev.Frame.GetType(), ev.Frame.GetToolCallId())
			case ev.Kind == agent.EventText && ev.Text != "B echoes." && ev.Text != "B's own answer.":
				t.Errorf("run B got text %q", ev.Text)
			}
		}
		ans := b.events[len(b.events)-1].Answer
		if ans == nil || ans.Text != "B's own answer." || len(ans.Rounds) != 1 {
			var rounds []string
			for _, r := range ans.Rounds {
				rounds = append(rounds, r.Text)
			}
			t.Fatalf("run B's answer %q after the rounds %q, want B's own after one round; the model got the requests %q",
				ans.Text, rounds, requestsOf(t, m))
		}
		if r := resultOf(t, ans, "b1"); r.IsError || string(r.Content) != `{"echo":"b"}` {
			t.Errorf("run B's echo result %+v", r)
		}
		if !slow.over.Load() {
			t.Error("run B ended before the model had noticed A's ABORT")
		}
		b1 := []string{"user:Task B.", "assistant:Noted.", "user:Now answer B."}
		want := [][]string{
			{"user:Task A: take your time."},
			b1,
			append(b1[:3:3], "assistant:B echoes.", `tool:{"echo":"b"}`),
		}
		if got := requestsOf(t, m); !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("the model got the requests %q, want %q", got, want)
		}
	})
}

// TestRun_WaitForDrainEndsWithCtx: a Run of a session whose cancelled
// conversation the loop still winds down, with a ctx that ends first,
// returns ctx's error having sent nothing: the model never sees its
// request, even once the drain is over. A Run after the drain runs as
// usual.
func TestRun_WaitForDrainEndsWithCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, slow := drainAgent(t)
		m := slow.m
		cancelledMidAnswer(t, a, slow, false)

		ctx, cancel := context.WithTimeout(context.Background(), windDown/2)
		defer cancel()
		start := time.Now()
		_, err := a.Run(ctx, "s1", askB)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("run B: %v, want context.DeadlineExceeded", err)
		}
		if waited := time.Since(start); waited != windDown/2 {
			t.Errorf("run B returned after %v, want its ctx's %v", waited, windDown/2)
		}
		time.Sleep(windDown) // the fake clock passes the wind-down
		synctest.Wait()      // the drain is over
		if got := requestsOf(t, m); len(got) != 1 {
			t.Fatalf("the model got the requests %q, want A's alone", got)
		}
		ans, err := a.Run(context.Background(), "s1", askB)
		if err != nil || ans.Text != "B's own answer." || len(ans.Rounds) != 1 {
			t.Fatalf("run after the drain: %+v, %v", ans, err)
		}
	})
}

// TestClose_EndsDrain: Close while the loop still winds a cancelled
// conversation down (and a Run of its session waits for that) stops the
// loop at once, which ends the drain: Close returns before the model has
// noticed the ABORT, the waiting Run fails with ErrClosed, and the runtime's
// cleanup finds no goroutine of the agent left.
func TestClose_EndsDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, slow := drainAgent(t)
		cancelledMidAnswer(t, a, slow, false)
		waited := make(chan error, 1)
		go func() {
			_, err := a.Run(context.Background(), "s1", askB)
			waited <- err
		}()
		synctest.Wait()
		if err := a.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if slow.over.Load() {
			t.Error("Close waited for the model to notice the ABORT")
		}
		if err := <-waited; !errors.Is(err, agent.ErrClosed) {
			t.Errorf("the Run waiting for the drain: %v, want ErrClosed", err)
		}
	})
}

// TestDiscard_PastGraceDrains: a Discard whose grace passes before the
// loop has ended the discarded conversation (the loop is held up as it
// answers the held call) returns ctx's error, and a Run of the session
// meanwhile waits until the loop has ended the old conversation: it runs
// one attempt of its own, sees none of the old conversation's frames (the
// held call's cancelled result, its ERROR and END) and waits for approval
// of its own call.
func TestDiscard_PastGraceDrains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, m, paused, release := slowToDiscard(t)
		err := a.Discard(context.Background(), "s1")
		if !errors.Is(err, agent.ErrGracePassed) || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Discard: %v, want ErrGracePassed after the grace, not context.DeadlineExceeded", err)
		}
		<-paused
		done := streamOf(a, "s1", ask)
		synctest.Wait() // the new Run has sent its request, or waits to
		close(release)
		b := <-done
		waiting(t, b.err, "c2")
		for _, ev := range b.events {
			if ev.Attempt > 1 || ev.Kind == agent.EventRestart ||
				(ev.Kind == agent.EventToolResult && ev.Result.FailureKind != "") {
				t.Errorf("the Run after the Discard got %v (attempt %d): %+v", ev.Kind, ev.Attempt, ev.Result)
			}
		}
		if n := len(m.Requests()); n != 2 {
			t.Errorf("the model got %d requests, want 2 (the discarded conversation's, the new one's)", n)
		}
		if got := a.Waiting(); !slices.Equal(got, []string{"s1"}) {
			t.Errorf("waiting sessions %v, want [s1]", got)
		}
	})
}

// slowToDiscard starts an agent whose session s1 waits for approval of
// call c2 and whose loop, once the session is discarded, is held up as it
// answers c2 (paused tells when) until release is closed.
func slowToDiscard(t *testing.T) (a *agent.Agent, m *scripted.Model, paused, release chan struct{}) {
	t.Helper()
	rt := actorstest.NewRuntime(t, nil)
	m = approvalScript(t)
	paused, release = make(chan struct{}), make(chan struct{})
	var once atomic.Bool
	a = newAgent(t, rt, m.Spec("model"), &agent.Options{Tools: []*tools.Tool{echo(nil), newLauncher().tool()},
		Approval: &tools.ApprovalOptions{}, CancelGrace: drainGrace,
		OnToolResult: func(ev tools.ToolResultEvent) {
			if ev.Call.GetToolCallId() == "c2" && ev.Result.IsErrorResult() && once.CompareAndSwap(false, true) {
				close(paused)
				<-release // the loop is slow to end the discarded conversation
			}
		}})
	_, err := a.Run(context.Background(), "s1", ask)
	waiting(t, err, "c2")
	return a, m, paused, release
}

// TestDiscard_OwnDeadlineBeforeGrace: a Discard whose ctx's deadline
// passes before CancelGrace (the loop held up as it ends the discarded
// conversation) returns context.DeadlineExceeded, its ctx's own, at that
// deadline: not ErrGracePassed, which is for the grace alone.
func TestDiscard_OwnDeadlineBeforeGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, _, paused, release := slowToDiscard(t)
		ctx, cancel := context.WithTimeout(context.Background(), drainGrace/4)
		defer cancel()
		start := time.Now()
		err := a.Discard(ctx, "s1")
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, agent.ErrGracePassed) {
			t.Errorf("Discard: %v, want its ctx's context.DeadlineExceeded, not ErrGracePassed", err)
		}
		if waited := time.Since(start); waited != drainGrace/4 {
			t.Errorf("Discard returned after %v, want its ctx's %v", waited, drainGrace/4)
		}
		<-paused
		close(release)
	})
}

// TestStream_PanickingConsumerDrains: a Stream whose consumer panics
// (a host bug the host recovers) leaves the conversation unfinished with
// no cancel: the agent aborts it and drains it as it does a cancelled
// one, so the next Run of the session gets exactly its own answer, not a
// conversation the loop is still working on.
func TestStream_PanickingConsumerDrains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, slow := drainAgent(t)
		func() {
			defer func() {
				if r := recover(); r != "host bug" {
					t.Errorf("recovered %v, want the consumer's panic", r)
				}
			}()
			for ev := range a.Stream(context.Background(), "s1", askA) {
				if ev.Kind == agent.EventText {
					panic("host bug")
				}
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 10*windDown)
		defer cancel()
		ans, err := a.Run(ctx, "s1", askB)
		if err != nil || ans.Text != "B's own answer." || len(ans.Rounds) != 1 {
			t.Fatalf("run B after a panicking consumer: %+v, %v; want B's own answer", ans, err)
		}
		if !slow.over.Load() {
			t.Error("run B ended before the model had noticed A's ABORT")
		}
	})
}

// TestClose_WaiterFailsAtOnce: a Run waiting for the drain of its
// session fails with ErrClosed as soon as Close begins, even while Close
// still waits for another session's running conversation: it does not
// wait for that conversation, nor for the drain.
func TestClose_WaiterFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, slow := drainAgent(t)
		cancelledMidAnswer(t, a, slow, false)
		ctx2, cancel2 := context.WithCancel(context.Background())
		defer cancel2()
		running := make(chan error, 1)
		go func() { // another session's conversation, which stalls until cancelled
			_, err := a.Run(ctx2, "s2", askA)
			running <- err
		}()
		waited := make(chan error, 1)
		go func() {
			_, err := a.Run(context.Background(), "s1", askB)
			waited <- err
		}()
		synctest.Wait()
		closed := make(chan error, 1)
		go func() { closed <- a.Close(context.Background()) }()
		synctest.Wait()
		select {
		case err := <-waited:
			if !errors.Is(err, agent.ErrClosed) {
				t.Errorf("the Run waiting for the drain: %v, want ErrClosed", err)
			}
		default:
			t.Error("the Run waiting for the drain still waits once Close has begun")
		}
		select {
		case err := <-closed:
			t.Fatalf("Close returned %v while a conversation runs", err)
		default:
		}
		cancel2()
		if err := <-running; !errors.Is(err, context.Canceled) {
			t.Errorf("the running conversation: %v, want context.Canceled", err)
		}
		if err := <-closed; err != nil {
			t.Errorf("Close: %v", err)
		}
		if len(waited) > 0 {
			t.Errorf("the waiting Run: %v, after Close", <-waited)
		}
	})
}

// TestRun_AbortAnsweredAtOnce: what bounds a drain. The loop ends an
// aborted conversation as soon as the model adapter has answered the
// ABORT, which the models contract has it do at once (ERROR and END of
// its request, whose context it cancels), and without waiting for the
// tool calls under way, which its router answers as cancelled at once,
// however long their handlers take to return. So a cancelled Run reads
// the conversation's END itself, with no time passing (not the grace, no
// timeout), leaves nothing to drain, and the next Run of the session runs
// at once: a drain outlives CancelGrace only with a model adapter slow to
// answer the ABORT (TestRun_CancelledPastGraceDrains), and lasts as long
// as it takes, or until Close stops the loop (TestClose_EndsDrain).
func TestRun_AbortAnsweredAtOnce(t *testing.T) {
	t.Run("model mid-answer", func(t *testing.T) {
		testAbortAnsweredAtOnce(t, scripted.Turn{Text: "A is working on it.", Stall: true}, nil)
	})
	t.Run("tool that ignores its cancel", func(t *testing.T) {
		testAbortAnsweredAtOnce(t, scripted.Turn{ToolCalls: []scripted.ToolCall{call("a1", "stuck", `{}`)}}, make(chan struct{}))
	})
}

// testAbortAnsweredAtOnce cancels session s1's conversation A, whose
// model answers with turn: once its text has come, or with started, once
// the tool "stuck" (which ignores its cancel, returning only at the
// test's end) runs.
func testAbortAnsweredAtOnce(t *testing.T, turn scripted.Turn, started chan struct{}) {
	synctest.Test(t, func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		release := make(chan struct{})
		t.Cleanup(func() { close(release) }) // before the runtime's cleanup
		stuck := tools.MustNew(tools.Definition{Name: "stuck", Timeout: tools.NoTimeout,
			Handler: func(context.Context, json.RawMessage) (any, error) {
				close(started)
				<-release
				return "too late", nil
			}})
		m := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{turn, {Text: "B's own answer."}}}, nil)
		a := newAgent(t, rt, m.Spec("model"), &agent.Options{Tools: []*tools.Tool{stuck}, CancelGrace: drainGrace})

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var at time.Time // when A was cancelled
		cancelA := func() { at = time.Now(); cancel() }
		if started != nil {
			go func() { <-started; cancelA() }()
		}
		var ans *models.Answer
		var err error
		for ev, evErr := range a.Stream(ctx, "s1", askA) {
			err = evErr
			if ev.Answer != nil {
				ans = ev.Answer
			}
			if started == nil && ev.Kind == agent.EventText {
				cancelA()
			}
		}
		if !errors.Is(err, context.Canceled) || ans == nil || !ans.Ended {
			t.Fatalf("run A: %v, answer %+v; want context.Canceled with the conversation ended", err, ans)
		}
		if waited := time.Since(at); waited != 0 {
			t.Fatalf("run A returned %v after its cancel: the loop's answer waited for a timer", waited)
		}
		if started != nil {
			if r := resultOf(t, ans, "a1"); r.FailureKind != string(tools.FailureCancelled) {
				t.Fatalf("the stuck call's result %+v, want cancelled", r)
			}
		}
		before := time.Now()
		b, err := a.Run(context.Background(), "s1", askB)
		if err != nil || b.Text != "B's own answer." || time.Since(before) != 0 {
			t.Fatalf("run B: %v, %+v, after %v", err, b, time.Since(before))
		}
	})
}
