package agent_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// TestRun_StreamsOfSessionsWithHashApart: session "x#2" runs its first
// attempt on the shared loop while session "x" fails its first and runs
// its second: the two never share a stream, and each gets its own answer.
func TestRun_StreamsOfSessionsWithHashApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		m, err := scripted.New(scripted.Script{Turns: []scripted.Turn{ // in the order the requests come
			{Text: "x#2's answer.", Delay: time.Minute}, // x#2's stream stays open meanwhile
			{Error: "overloaded"},                       // x's first attempt
			{Text: "x's answer."},                       // x's second
		}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		a := newAgent(t, rt, m.Spec("model"), nil)
		other := make(chan error, 1)
		go func() {
			ans, err := a.Run(context.Background(), "x#2", ask)
			if err == nil && ans.Text != "x#2's answer." {
				err = fmt.Errorf("answer %q", ans.Text)
			}
			other <- err
		}()
		synctest.Wait() // x#2's request is out
		ans, err := a.Run(context.Background(), "x", ask)
		if err != nil || ans.Text != "x's answer." {
			t.Fatalf("session x: %+v, %v; want its answer at its second attempt", ans, err)
		}
		if err := <-other; err != nil {
			t.Fatalf("session x#2: %v", err)
		}
		type run struct {
			session string
			attempt int
		}
		want := []run{{"x#2", 1}, {"x", 1}, {"x", 2}}
		recs := m.Requests()
		if len(recs) != len(want) {
			t.Fatalf("the model got %d requests, want %d", len(recs), len(want))
		}
		seen := map[string]bool{}
		for i, r := range recs {
			id := r.Request.StreamID
			if s, n := agent.SessionOf(id); (run{s, n}) != want[i] || seen[id] {
				t.Errorf("request %d on stream %q: session %q attempt %d, want %+v on a stream of its own", i, id, s, n, want[i])
			}
			seen[id] = true
		}
	})
}

// StreamID and SessionOf: every (session, attempt) pair has a stream of
// its own, read back as that pair; an id without '#' or '%' is kept.
func TestStreamID_RoundTrip(t *testing.T) {
	sessions := []string{"s1", "x", "x#2", "x%232", "x%", "%", "#", "a#b#3", "job#07", "naïve ☃#9", "x#1", "x#0"}
	ids := map[string]string{}
	for _, s := range sessions {
		for n := 1; n <= 12; n++ {
			id := agent.StreamID(s, n)
			if prev, dup := ids[id]; dup {
				t.Errorf("session %q attempt %d and %s share stream %q", s, n, prev, id)
			}
			ids[id] = fmt.Sprintf("session %q attempt %d", s, n)
			if gotS, gotN := agent.SessionOf(id); gotS != s || gotN != n {
				t.Errorf("SessionOf(%q) = %q, %d; want %q, %d", id, gotS, gotN, s, n)
			}
		}
	}
	for s, want := range map[string]string{"s1": "s1", "session-1": "session-1"} {
		if got := agent.StreamID(s, 1); got != want {
			t.Errorf("StreamID(%q, 1) = %q, want %q", s, got, want)
		}
	}
	if got := agent.StreamID("s1", 3); got != "s1#3" {
		t.Errorf("StreamID(s1, 3) = %q, want s1#3", got)
	}
}

// TestStream_BrokenAtRestartSendsNoAttempt: a host that stops ranging
// over a Stream when it sees EventRestart ("stop retrying") has no other
// attempt sent to the model, nor a tool of it run: the Run checks its ctx
// before each attempt after the first.
func TestStream_BrokenAtRestartSendsNoAttempt(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	m, err := scripted.New(scripted.Script{Turns: []scripted.Turn{
		{Error: "upstream hiccup"},
		{ToolCalls: []scripted.ToolCall{call("c1", "echo", `{"text":"hi"}`)}},
		{Text: "Done."},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	a := newAgent(t, rt, m.Spec("model"), &agent.Options{Tools: []*tools.Tool{echo(&calls)}})
	for ev, err := range a.Stream(testCtx(t), "s1", ask) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == agent.EventRestart {
			break
		}
	}
	if n := len(m.Requests()); n != 1 {
		t.Errorf("the model got %d requests; want 1: an attempt was sent after the consumer stopped the stream", n)
	}
	if calls.Load() != 0 {
		t.Errorf("a tool ran %d times after the consumer stopped the stream", calls.Load())
	}
}

// TestStream_CancelledGivesEveryResultAsEvent: a Stream cancelled while
// one of two parallel calls runs gives one EventToolResult for each call,
// the cancelled one's and the other's as the answer holds it, before the
// sequence ends with ctx's error in an EventError.
func TestStream_CancelledGivesEveryResultAsEvent(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	started, cancelled := make(chan string, 1), make(chan string, 1)
	a := newAgent(t, rt, model(t,
		scripted.Turn{ToolCalls: []scripted.ToolCall{call("c1", "wait", `{}`), call("c2", "echo", `{"text":"quick"}`)}},
		scripted.Turn{Text: "never"},
	), &agent.Options{Tools: []*tools.Tool{blocker(started, cancelled), echo(nil)}})
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	go func() { <-started; cancel() }()
	results := map[string][]models.ToolResult{}
	var last agent.Event
	var lastErr error
	for ev, err := range a.Stream(ctx, "s1", ask) {
		if lastErr != nil {
			t.Fatalf("event %v after the error event", ev.Kind)
		}
		if ev.Kind == agent.EventToolResult {
			results[ev.Result.CallID] = append(results[ev.Result.CallID], ev.Result)
		}
		last, lastErr = ev, err
	}
	if !errors.Is(lastErr, context.Canceled) {
		t.Fatalf("the sequence ended with %v, want context.Canceled", lastErr)
	}
	if last.Kind != agent.EventError || last.Text != lastErr.Error() {
		t.Errorf("the error event is %v %q, want %v with the error's text", last.Kind, last.Text, agent.EventError)
	}
	final := last.Answer
	if final == nil || len(final.Rounds) != 1 || len(final.Rounds[0].Results) != 2 {
		t.Fatalf("final answer %+v: want both calls answered", final)
	}
	if r := results["c1"]; len(r) != 1 || r[0].FailureKind != string(tools.FailureCancelled) {
		t.Errorf("c1: result events %+v, want one with failure kind cancelled", r)
	}
	// c2 ran at once: its result is its answer (or, on a slow machine,
	// cancelled); either way the event tells what the answer holds.
	if r := results["c2"]; len(r) != 1 || string(r[0].Content) != string(final.Rounds[0].Results[1].Content) {
		t.Errorf("c2: result events %+v, want one with the result the answer holds: %s", r, final.Rounds[0].Results[1].Content)
	}
}

// TestStream_ErrorEventAlwaysHasAnAnswer: the EventError that ends a
// Stream has what was answered so far, an empty answer when nothing was
// (a Stream refused at once: the session busy, the agent closed), so
// that a consumer reading ev.Answer never meets nil.
func TestStream_ErrorEventAlwaysHasAnAnswer(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	a, err := agent.New(rt, model(t, scripted.Turn{Text: "x"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"s", ""} { // closed; an invalid session id
		n := 0
		for ev, err := range a.Stream(context.Background(), s, ask) {
			n++
			if ev.Kind != agent.EventError || err == nil || ev.Answer == nil {
				t.Errorf("Stream of session %q: event %v (answer %v), error %v: want EventError with an answer", s, ev.Kind, ev.Answer, err)
			}
		}
		if n != 1 {
			t.Errorf("Stream of session %q gave %d events, want 1", s, n)
		}
	}
}

// TestAsTool_ErrorEventOfAClosedAgentHasAnAnswer: the last event
// ToolOptions.OnEvent gets of a delegation to a closed agent, refused at
// once, is an EventError with an empty answer, not a nil one.
func TestAsTool_ErrorEventOfAClosedAgentHasAnAnswer(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	writer, err := agent.New(rt, model(t, scripted.Turn{Text: "x"}), &agent.Options{Name: "writer"})
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var last agent.Event
	lead := delegatingLead(t, rt, writer, &agent.ToolOptions{OnEvent: func(_ string, ev agent.Event) { last = ev }})
	runLead(t, lead, "s", "Go.")
	if last.Kind != agent.EventError || last.Answer == nil {
		t.Errorf("last event of the delegation to a closed agent: %v, answer %v: want EventError with an answer", last.Kind, last.Answer)
	}
}
