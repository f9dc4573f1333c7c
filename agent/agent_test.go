package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability/boltstore"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/workspace"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// model is a scripted model answering each conversation by its number of
// assistant messages.
func model(t *testing.T, turns ...scripted.Turn) actors.Spec {
	t.Helper()
	m, err := scripted.New(scripted.Script{Select: scripted.ByConversation, Turns: turns}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m.Spec("model")
}

// requestMessages returns the messages of each request m got.
func requestMessages(t *testing.T, m *scripted.Model) [][]models.Message {
	t.Helper()
	var out [][]models.Message
	for _, r := range m.Requests() {
		raw, _ := r.Request.Param(models.ParamMessages)
		msgs, err := models.DecodeMessages(raw)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, msgs)
	}
	return out
}

func call(id, name, args string) scripted.ToolCall {
	return scripted.ToolCall{ID: id, Name: name, Arguments: args}
}

// echo answers {"echo": <its arguments' text>} and counts its calls.
func echo(calls *atomic.Int64) *tools.Tool {
	return tools.MustNewTyped(tools.Definition{Name: "echo", Description: "Echo the text.", Capabilities: []string{"read"}},
		func(_ context.Context, in struct {
			Text string `json:"text"`
		}) (map[string]string, error) {
			if calls != nil {
				calls.Add(1)
			}
			return map[string]string{"echo": in.Text}, nil
		})
}

func newAgent(t *testing.T, rt *actors.Runtime, spec actors.Spec, opts *agent.Options) *agent.Agent {
	t.Helper()
	a, err := agent.New(rt, spec, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Close(context.Background()); err != nil {
			t.Errorf("close agent: %v", err)
		}
	})
	return a
}

var ask = []models.Message{models.UserMessage("Say hello through echo.")}

func TestRun_PlainAnswer(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	a := newAgent(t, rt, model(t, scripted.Turn{Text: "Hello there.", Deltas: 3,
		Usage: &models.Usage{PromptTokens: 5, CompletionTokens: 3, TotalTokens: 8}}), nil)
	ans, err := a.Run(testCtx(t), "s1", ask)
	if err != nil {
		t.Fatal(err)
	}
	if ans.Text != "Hello there." || len(ans.Rounds) != 0 || ans.Usage.TotalTokens != 8 || ans.Finish != "stop" {
		t.Fatalf("answer %+v", ans)
	}
}

// TestRun_ToolRoundsTextKeptApart: what the model says along with its
// calls stays with the round; the final answer is only the last response.
func TestRun_ToolRoundsTextKeptApart(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	var calls atomic.Int64
	a := newAgent(t, rt, model(t,
		scripted.Turn{Text: "Let me echo it.", ToolCalls: []scripted.ToolCall{call("c1", "echo", `{"text":"hi"}`)}},
		scripted.Turn{ToolCalls: []scripted.ToolCall{call("c2", "echo", `{"text":"<b> & c"}`)}},
		scripted.Turn{Text: "It said hi."},
	), &agent.Options{Tools: []*tools.Tool{echo(&calls)}, SystemPrompt: "Be brief."})
	ans, err := a.Run(testCtx(t), "s1", ask)
	if err != nil {
		t.Fatal(err)
	}
	if ans.Text != "It said hi." || len(ans.Rounds) != 2 || ans.Rounds[0].Text != "Let me echo it." || ans.Rounds[1].Text != "" {
		t.Fatalf("answer %+v", ans)
	}
	if got := string(ans.Rounds[1].Results[0].Content); got != `{"echo":"<b> & c"}` {
		t.Fatalf("second result %s", got)
	}
	if calls.Load() != 2 || ans.ToolCalls() != 2 || ans.FailedCalls() != 0 {
		t.Fatalf("%d calls ran, answer counts %d", calls.Load(), ans.ToolCalls())
	}
}

// TestRun_SessionsOfOneAgentAtOnce: sessions of one agent run at the same
// time on its one loop, their rounds interleaved, and each gets its own
// answer with its own results.
func TestRun_SessionsOfOneAgentAtOnce(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	var calls atomic.Int64
	a := newAgent(t, rt, model(t,
		scripted.Turn{ToolCalls: []scripted.ToolCall{call("c1", "echo", `{"text":"one"}`)}},
		scripted.Turn{ToolCalls: []scripted.ToolCall{call("c2", "echo", `{"text":"two"}`)}},
		scripted.Turn{Text: "done"},
	), &agent.Options{Tools: []*tools.Tool{echo(&calls)}, SystemPrompt: "Be brief."})
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		go func() {
			ans, err := a.Run(testCtx(t), fmt.Sprintf("s%d", i), ask)
			switch {
			case err != nil:
			case ans.Text != "done" || len(ans.Rounds) != 2:
				err = fmt.Errorf("session %d: answer %+v", i, ans)
			case string(ans.Rounds[0].Results[0].Content) != `{"echo":"one"}` || string(ans.Rounds[1].Results[0].Content) != `{"echo":"two"}`:
				err = fmt.Errorf("session %d: results %s, %s", i, ans.Rounds[0].Results[0].Content, ans.Rounds[1].Results[0].Content)
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if calls.Load() != 2*n {
		t.Errorf("%d calls ran, want %d", calls.Load(), 2*n)
	}
}

// TestStream_Events: the events of a tool round, in order, then the
// answer.
func TestStream_Events(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	a := newAgent(t, rt, model(t,
		scripted.Turn{Text: "Echoing.", ToolCalls: []scripted.ToolCall{call("c1", "echo", `{"text":"hi"}`)},
			Usage: &models.Usage{TotalTokens: 4}},
		scripted.Turn{Text: "Done."},
	), &agent.Options{Tools: []*tools.Tool{echo(nil)}})
	var kinds []string
	var done *models.Answer
	for ev, err := range a.Stream(testCtx(t), "s1", ask) {
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, ev.Kind.String())
		if ev.Kind == agent.EventDone {
			done = ev.Answer
		} else if ev.Frame == nil || ev.Frame.GetStreamId() != "s1" {
			t.Fatalf("%v event without its frame of stream s1: %v", ev.Kind, ev.Frame)
		}
		if ev.Kind == agent.EventFrame && !slices.Contains([]string{"META", "END"}, ev.Frame.GetType().String()) {
			t.Fatalf("frame event for a %v frame", ev.Frame.GetType())
		}
	}
	// META finish after each response, END at the end: frames only.
	want := []string{"text", "tool_call", "usage", "frame", "tool_result", "text", "frame", "frame", "done"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("events %q, want %q", kinds, want)
	}
	if done == nil || done.Text != "Done." {
		t.Fatalf("done %+v", done)
	}
}

// TestRun_RestartMidAnswerResumed: the tool loop crashes as it reports a
// result; its supervisor restarts it and the attempt ends with ERROR; Run
// sends the conversation so far again (the completed round included, so
// the tool does not run again) and gets the final answer.
func TestRun_RestartMidAnswerResumed(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	var calls atomic.Int64
	var crashed atomic.Bool
	a := newAgent(t, rt, model(t,
		scripted.Turn{ToolCalls: []scripted.ToolCall{call("c1", "echo", `{"text":"hi"}`)}},
		scripted.Turn{Text: "Done."},
	), &agent.Options{Tools: []*tools.Tool{echo(&calls)}, OnToolResult: func(tools.ToolResultEvent) {
		if crashed.CompareAndSwap(false, true) {
			panic("injected: loop crash")
		}
	}})
	var kinds []agent.EventKind
	var ans *models.Answer
	for ev, err := range a.Stream(testCtx(t), "s1", ask) {
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, ev.Kind)
		ans = ev.Answer
	}
	if !slices.Contains(kinds, agent.EventRestart) || ans == nil || ans.Text != "Done." {
		t.Fatalf("events %v, answer %+v", kinds, ans)
	}
	if calls.Load() != 1 || len(ans.Rounds) != 1 || !ans.Rounds[0].Complete() {
		t.Fatalf("tool ran %d times, rounds %+v", calls.Load(), ans.Rounds)
	}
}

// TestRun_RestartsKeepRoundsOnce: over three attempts, the rounds kept
// from each failed attempt are kept once: the answer holds each round
// and each attempt's usage once, and the last attempt sends the model
// each round once (a round sent twice would make the script answer
// "Dup.").
func TestRun_RestartsKeepRoundsOnce(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "Run", true: "Stream"}[stream], func(t *testing.T) {
			rt := actorstest.NewRuntime(t, nil)
			var calls, crashes atomic.Int64
			m := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
				{ToolCalls: []scripted.ToolCall{call("c1", "echo", `{"text":"one"}`)}, Usage: &models.Usage{TotalTokens: 1}},
				{ToolCalls: []scripted.ToolCall{call("c2", "echo", `{"text":"two"}`)}, Usage: &models.Usage{TotalTokens: 10}},
				{Text: "Done.", Usage: &models.Usage{TotalTokens: 100}},
				{Text: "Dup.", Usage: &models.Usage{TotalTokens: 1000}},
			}}, nil)
			a := newAgent(t, rt, m.Spec("model"), &agent.Options{Tools: []*tools.Tool{echo(&calls)}, MaxAttempts: 5,
				OnToolResult: func(tools.ToolResultEvent) {
					if crashes.Add(1) <= 2 {
						panic("injected: loop crash")
					}
				}})
			var ans *models.Answer
			var err error
			var restarts []int // rounds kept at each restart
			if stream {
				for ev, evErr := range a.Stream(testCtx(t), "s1", ask) {
					ans, err = ev.Answer, evErr
					if ev.Kind == agent.EventRestart {
						restarts = append(restarts, len(ev.Answer.Rounds))
					}
				}
				if want := []int{1, 2}; err == nil && !slices.Equal(restarts, want) {
					t.Errorf("rounds kept at the restarts %v, want %v", restarts, want)
				}
			} else {
				ans, err = a.Run(testCtx(t), "s1", ask)
			}
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, r := range ans.Rounds {
				for _, c := range r.Calls {
					ids = append(ids, c.ID)
				}
			}
			if ans.Text != "Done." || !slices.Equal(ids, []string{"c1", "c2"}) || calls.Load() != 2 {
				t.Errorf("answer %q with rounds of calls %v, tool ran %d times; want \"Done.\" with [c1 c2], 2 runs",
					ans.Text, ids, calls.Load())
			}
			if ans.Usage.TotalTokens != 111 {
				t.Errorf("usage %+v, want 111 total tokens (each attempt once)", ans.Usage)
			}
			reqs := requestMessages(t, m)
			if len(reqs) != 3 {
				t.Fatalf("the model got %d requests, want 3", len(reqs))
			}
			var got []string
			for _, msg := range reqs[2] {
				got = append(got, msg.Role+":"+msg.ToolCallID)
				for _, c := range msg.ToolCalls {
					got[len(got)-1] += c.ID
				}
			}
			want := []string{"user:", "assistant:c1", "tool:c1", "assistant:c2", "tool:c2"}
			if !slices.Equal(got, want) {
				t.Fatalf("the last attempt sent %v, want %v", got, want)
			}
		})
	}
}

// TestRun_AttemptsExhausted: a model that always fails gives a
// FailedError after MaxAttempts.
func TestRun_AttemptsExhausted(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	a := newAgent(t, rt, model(t, scripted.Turn{Error: "overloaded"}), &agent.Options{MaxAttempts: 2})
	_, err := a.Run(testCtx(t), "s1", ask)
	var failed *agent.FailedError
	if !errors.As(err, &failed) || failed.Attempts != 2 || failed.Reason == "" {
		t.Fatalf("err %v, want FailedError after 2 attempts", err)
	}
}

// blocker is a tool whose calls block until cancelled; it reports each
// start and each cancellation.
func blocker(started, cancelled chan<- string) *tools.Tool {
	return tools.MustNew(tools.Definition{Name: "wait", Timeout: tools.NoTimeout,
		Handler: func(ctx context.Context, args json.RawMessage) (any, error) {
			started <- string(args)
			<-ctx.Done()
			cancelled <- string(args)
			return nil, ctx.Err()
		}})
}

// TestRun_CancelMidTool: cancelling ctx while a tool runs cancels the
// tool and returns ctx's error with the call answered.
func TestRun_CancelMidTool(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	started, cancelled := make(chan string, 1), make(chan string, 1)
	a := newAgent(t, rt, model(t,
		scripted.Turn{ToolCalls: []scripted.ToolCall{call("c1", "wait", `{}`)}},
		scripted.Turn{Text: "never"},
	), &agent.Options{Tools: []*tools.Tool{blocker(started, cancelled)}})
	ctx, cancel := context.WithCancel(testCtx(t))
	go func() { <-started; cancel() }()
	ans, err := a.Run(ctx, "s1", ask)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	select {
	case <-cancelled:
	case <-testCtx(t).Done():
		t.Fatal("the tool was not cancelled")
	}
	if len(ans.Rounds) != 1 || !ans.Rounds[0].Complete() || !ans.Rounds[0].Results[0].IsError {
		t.Fatalf("rounds %+v: want the call answered with an error", ans.Rounds)
	}
}

// TestRun_SessionBusy: one conversation per session at a time, however
// many sessions run. ErrSessionBusy, and ErrClosed once the agent is
// closed, come wrapped with the agent's name and the session, as Run's
// other errors do: with many agents in one host, the bare sentinels did
// not say which agent refused.
func TestRun_SessionBusy(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	started, cancelled := make(chan string, 1), make(chan string, 4)
	a := newAgent(t, rt, model(t, scripted.Turn{ToolCalls: []scripted.ToolCall{call("c1", "wait", `{}`)}}),
		&agent.Options{Tools: []*tools.Tool{blocker(started, cancelled)}})
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() { _, err := a.Run(ctx, "s1", ask); done <- err }()
	<-started
	if _, err := a.Run(testCtx(t), "s1", ask); !errors.Is(err, agent.ErrSessionBusy) || !strings.Contains(err.Error(), `agent "agent": session "s1"`) {
		t.Fatalf("second run of a busy session: %v", err)
	}
	// A second and a third session run beside it, and are busy as well.
	ctx2, cancel2 := context.WithCancel(testCtx(t))
	done2 := make(chan error, 2)
	for _, id := range []string{"s2", "s3"} {
		go func() { _, err := a.Run(ctx2, id, ask); done2 <- err }()
		<-started
	}
	for _, id := range []string{"s1", "s2", "s3"} {
		if _, err := a.Run(testCtx(t), id, ask); !errors.Is(err, agent.ErrSessionBusy) {
			t.Fatalf("another run of busy session %s: %v", id, err)
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v", err)
	}
	// s1 is free again while the others still run.
	ctx1, cancel1 := context.WithCancel(testCtx(t))
	go func() { _, err := a.Run(ctx1, "s1", ask); done <- err }()
	<-started
	if _, err := a.Run(testCtx(t), "s2", ask); !errors.Is(err, agent.ErrSessionBusy) {
		t.Fatalf("s2 after s1 ended: %v", err)
	}
	cancel1()
	cancel2()
	for range 2 {
		if err := <-done2; !errors.Is(err, context.Canceled) {
			t.Fatalf("other session: %v", err)
		}
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("s1 again: %v", err)
	}
	if err := a.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(testCtx(t), "s4", ask); !errors.Is(err, agent.ErrClosed) || !strings.Contains(err.Error(), `agent "agent": session "s4"`) {
		t.Fatalf("run after Close: %v", err)
	}
}

// TestRun_DurableResumeAcrossRuntimes: with a bbolt store, a conversation
// whose model failed after a tool round resumes in a new runtime (a new
// process, as far as the agent can tell) from the store: the completed
// call is not run again, and the answer comes.
func TestRun_DurableResumeAcrossRuntimes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.db")
	var calls atomic.Int64
	first := func() {
		store, err := boltstore.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		rt, err := actors.NewRuntime(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close(context.Background())
		a, err := agent.New(rt, model(t,
			scripted.Turn{ToolCalls: []scripted.ToolCall{call("c1", "echo", `{"text":"hi"}`)}},
			scripted.Turn{Error: "the model went away"},
		), &agent.Options{Name: "durable", Tools: []*tools.Tool{echo(&calls)}, Store: store, MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close(context.Background())
		var failed *agent.FailedError
		if _, err := a.Run(testCtx(t), "session-1", ask); !errors.As(err, &failed) {
			t.Fatalf("first process: %v, want FailedError", err)
		}
	}
	first()
	store, err := boltstore.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	rt := actorstest.NewRuntime(t, nil)
	a := newAgent(t, rt, model(t,
		scripted.Turn{ToolCalls: []scripted.ToolCall{call("c1", "echo", `{"text":"hi"}`)}},
		scripted.Turn{Text: "Resumed and done."},
	), &agent.Options{Name: "durable", Tools: []*tools.Tool{echo(&calls)}, Store: store})
	ans, err := a.Run(testCtx(t), "session-1", ask)
	if err != nil {
		t.Fatal(err)
	}
	if ans.Text != "Resumed and done." || calls.Load() != 1 {
		t.Fatalf("answer %q, tool ran %d times", ans.Text, calls.Load())
	}
	// The session has ended: asking again answers from the store.
	again, err := a.Run(testCtx(t), "session-1", ask)
	if err != nil || again.Text != "Resumed and done." || calls.Load() != 1 {
		t.Fatalf("ended session: %+v, %v, %d calls", again, err, calls.Load())
	}
}

// TestRun_AgentNamesWithSlash: a name is one element of the actor tree's
// paths, whatever it holds. Unescaped, the loop of an agent "team/model"
// was "polyweave/team/model", the id of the model child of the loop of an
// agent "team": whichever ran second could not start its loop, and every
// Run of it failed with a bare "duplex stopped". Both orders run, and the
// loop's actor name is the agent's name escaped as in SessionKey.
func TestRun_AgentNamesWithSlash(t *testing.T) {
	for _, order := range [][]string{{"team/model", "team"}, {"team", "team/model"}} {
		t.Run(order[0]+" first", func(t *testing.T) {
			rt := actorstest.NewRuntime(t, nil)
			for _, name := range order {
				a := newAgent(t, rt, model(t, scripted.Turn{Text: "hi from " + name}), &agent.Options{Name: name})
				ans, err := a.Run(testCtx(t), "s", ask)
				if err != nil {
					t.Errorf("agent %q: %v", name, err)
				} else if ans.Text != "hi from "+name {
					t.Errorf("agent %q answered %q", name, ans.Text)
				}
			}
			if !slices.ContainsFunc(rt.Actors(), func(ai actors.ActorInfo) bool { return ai.Name == "team%2Fmodel" }) {
				t.Errorf("no loop named %q among %v", "team%2Fmodel", rt.Actors())
			}
		})
	}
}

// TestRun_ManyAgentsOneRuntime: 200 agents with default options in one
// runtime, each with the workspace tools on its own root, run
// concurrently to their answers; the runtime's cleanup closes it and
// finds no goroutine left.
func TestRun_ManyAgentsOneRuntime(t *testing.T) {
	const n = 200
	rt := actorstest.NewRuntime(t, nil)
	spec := model(t,
		scripted.Turn{Text: "Writing.", ToolCalls: []scripted.ToolCall{call("w", "write_file", `{"path":"note.txt","content":"hello"}`)}},
		scripted.Turn{ToolCalls: []scripted.ToolCall{call("r", "read_file", `{"path":"note.txt"}`)}},
		scripted.Turn{Text: "The note says hello."},
	)
	agents := make([]*agent.Agent, n)
	roots := make([]string, n)
	for i := range n {
		roots[i] = t.TempDir()
		ws, err := workspace.New(roots[i], &workspace.Options{Sandbox: workspace.SandboxOff}) // no commands run here
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ws.Close() })
		toolset, err := workspace.Tools(ws)
		if err != nil {
			t.Fatal(err)
		}
		agents[i] = newAgent(t, rt, spec, &agent.Options{Tools: toolset})
	}
	ctx := testCtx(t)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ans, err := a.Run(ctx, fmt.Sprint("s", i), ask)
			switch {
			case err != nil:
				errs[i] = err
			case ans.Text != "The note says hello." || ans.FailedCalls() != 0 || ans.ToolCalls() != 2:
				errs[i] = fmt.Errorf("answer %+v", ans)
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("agent %d: %v", i, err)
		}
	}
	for i, root := range roots {
		if b, err := readFile(filepath.Join(root, "note.txt")); err != nil || b != "hello" {
			t.Fatalf("agent %d's root: %q, %v", i, b, err)
		}
	}
}

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}

// TestRun_DurableCancelledResumes: with a Store, a Run cancelled while
// its call runs (ABORT: the call is answered as cancelled) leaves the
// session resumable: a later Run with the same session id and messages
// gives the call the same cancelled result, does not run it again
// (although it is idempotent), and carries on to the model's answer.
func TestRun_DurableCancelledResumes(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	rt := actorstest.NewRuntime(t, nil)
	var runs atomic.Int64
	started := make(chan struct{}, 1)
	block := tools.MustNew(tools.Definition{Name: "block", Idempotent: true,
		Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
			runs.Add(1)
			started <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		}})
	a := newAgent(t, rt, model(t,
		scripted.Turn{ToolCalls: []scripted.ToolCall{call("c1", "block", `{}`)}},
		scripted.Turn{Text: "Answered after the cancel."},
	), &agent.Options{Name: "durable", Tools: []*tools.Tool{block}, Store: store})
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	type result struct {
		ans *models.Answer
		err error
	}
	done := make(chan result, 1)
	go func() {
		ans, err := a.Run(ctx, "session-1", ask)
		done <- result{ans, err}
	}()
	<-started
	cancel()
	first := <-done
	if !errors.Is(first.err, context.Canceled) || len(first.ans.Rounds) != 1 || len(first.ans.Rounds[0].Results) != 1 {
		t.Fatalf("cancelled Run: %+v, %v, want context.Canceled and the call's result", first.ans, first.err)
	}
	saw := first.ans.Rounds[0].Results[0]
	if saw.FailureKind != string(tools.FailureCancelled) {
		t.Fatalf("cancelled Run: the call's result %+v, want cancelled", saw)
	}
	ans, err := a.Run(testCtx(t), "session-1", ask)
	if err != nil {
		t.Fatal(err)
	}
	if ans.Text != "Answered after the cancel." || len(ans.Rounds) != 1 || len(ans.Rounds[0].Results) != 1 {
		t.Fatalf("resumed Run: %+v, want the cancelled round and the model's answer", ans)
	}
	if got := ans.Rounds[0].Results[0]; got.FailureKind != saw.FailureKind || string(got.Content) != string(saw.Content) {
		t.Errorf("resumed Run: the call's result %+v, want what the cancelled Run saw: %+v", got, saw)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the call ran %d times, want once", n)
	}
}
