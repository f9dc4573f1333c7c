// Package modeltest is the conformance suite for model adapters: every
// adapter runs [Run] to show it keeps the contract of package models.
//
// The suite describes what the model should answer with scripted turns
// ([scripted.Turn]); the adapter's own test turns them into a model that
// answers that way (a scripted model, or an HTTP test server streaming
// them in its wire format) and hands back the adapter and a view of the
// requests that model received. The suite then drives the adapter through
// a real actor runtime and checks, with models.Response, the shape of each
// answer: text, tool calls (atomic or streaming), META usage and finish,
// one END per request, errors ending with ERROR and END, cancellation, and
// several streams at once.
package modeltest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
)

// Harness is an adapter under test and the fake model behind it.
type Harness struct {
	// Spec is the adapter duplex.
	Spec actors.Spec
	// Requests returns the requests the model behind the adapter has
	// received so far, in arrival order, each as its top-level fields
	// (PARAM name, or request body field, to raw JSON value).
	Requests func() []map[string]json.RawMessage
}

// NewFunc makes a harness whose model answers the n-th request it
// receives with turns[n]. The suite uses these fields of a turn: Text,
// Deltas, ToolCalls (ID, Name, Arguments, Chunks, Split), Usage, Finish,
// Error and Stall (a stalled turn must stay in flight, its text delivered,
// until cancelled). NewFunc registers its own cleanup with t.Cleanup; the
// suite closes the actor runtime before that cleanup runs.
type NewFunc func(t *testing.T, turns []scripted.Turn) Harness

// Run runs the conformance suite against the adapters newHarness makes.
func Run(t *testing.T, newHarness NewFunc) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, NewFunc)
	}{
		{"TextAndUsage", testTextAndUsage},
		{"ParallelToolCalls", testParallelToolCalls},
		{"TextBeforeToolCalls", testTextBeforeToolCalls},
		{"EmptyArguments", testEmptyArguments},
		{"ForcedToolChoiceStop", testForcedToolChoiceStop},
		{"ErrorTurn", testErrorTurn},
		{"Cancel", func(t *testing.T, nh NewFunc) { testStop(t, nh, messages.Cancel) }},
		{"Abort", func(t *testing.T, nh NewFunc) {
			testStop(t, nh, func(id, _ string) *messages.Frame { return messages.Abort(id) })
		}},
		{"ConcurrentStreams", testConcurrentStreams},
		{"FollowUpOnSameStream", testFollowUpOnSameStream},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newHarness) })
	}
}

// session is one subtest's runtime, adapter and connection.
type session struct {
	t    *testing.T
	h    Harness
	conn *actors.Conn
	ctx  context.Context
}

func start(t *testing.T, newHarness NewFunc, turns ...scripted.Turn) *session {
	t.Helper()
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) }) // runs last
	h := newHarness(t, turns)
	conn, err := Runtime(t).Start(h.Spec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return &session{t: t, h: h, conn: conn, ctx: ctx}
}

// Runtime starts an actor runtime that t's cleanup closes (waiting up to
// 10 s). Register a goleak check before calling it, so that the check runs
// after the close.
func Runtime(t testing.TB) *actors.Runtime {
	t.Helper()
	rt, err := actors.NewRuntime(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rt.Close(ctx); err != nil {
			t.Errorf("close runtime: %v", err)
		}
	})
	return rt
}

// standard request values, checked to reach the model unchanged.
var (
	userMessages = json.RawMessage(`[{"role":"system","content":"Be brief."},{"role":"user","content":"Say hello. ✓"}]`)
	toolsParam   = json.RawMessage(`[{"type":"function","function":{"name":"read_file","description":"Read a file","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}}]`)
)

// send writes a request: the standard messages and tools, extra params,
// and END.
func (s *session) send(stream string, extra ...models.Param) {
	s.t.Helper()
	frames := []*messages.Frame{
		messages.RawParam(stream, models.ParamMessages, userMessages),
		messages.RawParam(stream, models.ParamTools, toolsParam),
	}
	for _, p := range extra {
		frames = append(frames, messages.RawParam(stream, p.Name, p.Value))
	}
	frames = append(frames, messages.End(stream))
	if err := s.conn.SendAll(frames...); err != nil {
		s.t.Fatal(err)
	}
}

// read reads the response of stream up to its END and checks it against
// the contract.
func (s *session) read(stream string) *models.Response {
	s.t.Helper()
	frames, err := s.conn.RecvStream(s.ctx, stream)
	if err != nil {
		s.t.Fatalf("read %s: %v (got %s)", stream, err, describe(frames))
	}
	r, err := models.ReadResponse(frames)
	if err != nil {
		s.t.Fatalf("response breaks the contract: %v\nframes: %s", err, describe(frames))
	}
	return r
}

func describe(frames []*messages.Frame) string {
	var b bytes.Buffer
	for _, f := range frames {
		fmt.Fprintf(&b, "\n  %s id=%q name=%q text=%q payload=%s meta=%v", f.GetType(), f.GetToolCallId(), f.GetName(), f.GetText(), f.GetPayload(), f.GetMeta())
	}
	return b.String()
}

// wantCalls checks r's tool calls against the turn's.
func wantCalls(t *testing.T, r *models.Response, calls []scripted.ToolCall) {
	t.Helper()
	if len(r.ToolCalls) != len(calls) {
		t.Fatalf("got %d tool calls, want %d: %+v", len(r.ToolCalls), len(calls), r.ToolCalls)
	}
	for i, want := range calls {
		got := r.ToolCalls[i]
		args := want.Arguments
		if args == "" {
			for _, c := range want.Chunks {
				args += c
			}
		}
		if args == "" {
			args = "{}"
		}
		if got.ID != want.ID || got.Name != want.Name || got.Index != i || !JSONEqual(got.Arguments, []byte(args)) {
			t.Errorf("call %d = {%s %s %d %s}, want {%s %s %d %s}", i, got.ID, got.Name, got.Index, got.Arguments, want.ID, want.Name, i, args)
		}
	}
}

// JSONEqual reports whether a and b are valid JSON encoding the same value.
func JSONEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return bytes.Equal(ja, jb)
}

func wantFinished(t *testing.T, r *models.Response, finish string) {
	t.Helper()
	if r.Failed {
		t.Fatalf("response failed: %s", r.Error)
	}
	if !r.Ended || r.Finish != finish {
		t.Fatalf("ended %v with finish %q, want finish %q", r.Ended, r.Finish, finish)
	}
}

func testTextAndUsage(t *testing.T, nh NewFunc) {
	s := start(t, nh, scripted.Turn{Text: "Hello, wörld: streaming works.", Deltas: 4,
		Usage: &scripted.Usage{PromptTokens: 11, CompletionTokens: 7, TotalTokens: 18}})
	s.send("s1", models.Param{Name: "temperature", Value: json.RawMessage(`0.2`)},
		models.Param{Name: models.ParamToolChoice, Value: json.RawMessage(`"auto"`)})
	r := s.read("s1")
	wantFinished(t, r, "stop")
	if r.Text != "Hello, wörld: streaming works." || len(r.ToolCalls) != 0 {
		t.Fatalf("text %q, calls %+v", r.Text, r.ToolCalls)
	}
	var usage struct {
		Prompt     int `json:"prompt_tokens"`
		Completion int `json:"completion_tokens"`
		Total      int `json:"total_tokens"`
	}
	if err := json.Unmarshal(r.Usage, &usage); err != nil || usage.Total != 18 || usage.Prompt != 11 || usage.Completion != 7 {
		t.Fatalf("usage %s (%v), want 11/7/18", r.Usage, err)
	}
	reqs := s.h.Requests()
	if len(reqs) != 1 {
		t.Fatalf("model received %d requests, want 1", len(reqs))
	}
	for name, want := range map[string]json.RawMessage{
		models.ParamMessages: userMessages, models.ParamTools: toolsParam,
		models.ParamToolChoice: json.RawMessage(`"auto"`), "temperature": json.RawMessage(`0.2`),
	} {
		if got := reqs[0][name]; !JSONEqual(got, want) {
			t.Errorf("model received %s = %s, want %s", name, got, want)
		}
	}
}

func testParallelToolCalls(t *testing.T, nh NewFunc) {
	calls := []scripted.ToolCall{
		{ID: "call_a", Name: "read_file", Arguments: `{"path":"a.txt"}`},
		{ID: "call_b", Name: "read_file", Arguments: `{"path":"dir/ünïcode.txt","limit":10}`, Split: 5},
		{ID: "call_c", Name: "write_file", Chunks: []string{`{"pa`, `th":"c`, `.txt","content":"x\"y"}`}},
	}
	s := start(t, nh, scripted.Turn{ToolCalls: calls})
	s.send("s1")
	r := s.read("s1")
	wantFinished(t, r, "tool_calls")
	wantCalls(t, r, calls)
	if r.Text != "" {
		t.Fatalf("unexpected text %q", r.Text)
	}
}

func testTextBeforeToolCalls(t *testing.T, nh NewFunc) {
	calls := []scripted.ToolCall{{ID: "call_1", Name: "read_file", Arguments: `{"path":"go.mod"}`, Split: 2}}
	s := start(t, nh, scripted.Turn{Text: "Let me look.", Deltas: 2, ToolCalls: calls})
	s.send("s1")
	r := s.read("s1")
	wantFinished(t, r, "tool_calls")
	if r.Text != "Let me look." {
		t.Fatalf("text %q", r.Text)
	}
	wantCalls(t, r, calls)
}

func testEmptyArguments(t *testing.T, nh NewFunc) {
	calls := []scripted.ToolCall{{ID: "call_1", Name: "list_files"}}
	s := start(t, nh, scripted.Turn{ToolCalls: calls})
	s.send("s1")
	r := s.read("s1")
	wantFinished(t, r, "tool_calls")
	wantCalls(t, r, calls) // empty arguments arrive as {}
}

func testForcedToolChoiceStop(t *testing.T, nh NewFunc) {
	calls := []scripted.ToolCall{{ID: "call_1", Name: "read_file", Arguments: `{"path":"x"}`}}
	s := start(t, nh, scripted.Turn{ToolCalls: calls, Finish: "stop"})
	s.send("s1", models.Param{Name: models.ParamToolChoice, Value: json.RawMessage(`{"type":"function","function":{"name":"read_file"}}`)})
	r := s.read("s1")
	wantFinished(t, r, "stop")
	wantCalls(t, r, calls) // calls are told by their presence, not the finish reason
}

func testErrorTurn(t *testing.T, nh NewFunc) {
	s := start(t, nh, scripted.Turn{Error: "model overloaded"}, scripted.Turn{Text: "recovered"})
	s.send("s1")
	r := s.read("s1")
	if !r.Failed || r.Error == "" || !r.Ended {
		t.Fatalf("failed %v (%q), ended %v: want ERROR then END", r.Failed, r.Error, r.Ended)
	}
	if len(r.ToolCalls) != 0 || r.Finish != "" {
		t.Fatalf("failed response has calls %+v or finish %q", r.ToolCalls, r.Finish)
	}
	s.send("s2")
	wantFinished(t, s.read("s2"), "stop") // the adapter is still serving
}

// testStop cancels (or aborts) a stalled turn after its text arrived.
func testStop(t *testing.T, nh NewFunc, stop func(stream, call string) *messages.Frame) {
	s := start(t, nh, scripted.Turn{Text: "partial", Stall: true}, scripted.Turn{Text: "next"})
	s.send("s1")
	var got []*messages.Frame
	for {
		f, err := s.conn.Recv(s.ctx)
		if err != nil {
			t.Fatalf("waiting for the stalled turn's text: %v (got %s)", err, describe(got))
		}
		got = append(got, f)
		if f.GetType() == messages.FrameType_TEXT {
			break
		}
		if f.GetType() == messages.FrameType_END {
			t.Fatalf("stalled turn ended: %s", describe(got))
		}
	}
	if err := s.conn.Send(stop("s1", "")); err != nil {
		t.Fatal(err)
	}
	rest, err := s.conn.RecvStream(s.ctx, "s1")
	if err != nil {
		t.Fatalf("after stop: %v", err)
	}
	r, err := models.ReadResponse(append(got, rest...))
	if err != nil {
		t.Fatalf("response breaks the contract: %v%s", err, describe(append(got, rest...)))
	}
	if !r.Failed || r.Error != models.ErrCancelled.Error() || !r.Ended {
		t.Fatalf("failed %v with %q, ended %v: want ERROR(%q) then END", r.Failed, r.Error, r.Ended, models.ErrCancelled)
	}
	// Stopping an idle stream does nothing; the stream can be used again.
	if err := s.conn.Send(stop("s1", "")); err != nil {
		t.Fatal(err)
	}
	s.send("s1")
	r = s.read("s1")
	wantFinished(t, r, "stop")
	if r.Text != "next" {
		t.Fatalf("after stop, text %q, want %q", r.Text, "next")
	}
}

func testConcurrentStreams(t *testing.T, nh NewFunc) {
	texts := []string{"alpha one", "beta two", "gamma three"}
	var turns []scripted.Turn
	for _, x := range texts {
		turns = append(turns, scripted.Turn{Text: x, Deltas: 3})
	}
	s := start(t, nh, turns...)
	streams := []string{"a", "b", "c"}
	for _, id := range streams {
		s.send(id)
	}
	var got []string
	for _, id := range streams {
		r := s.read(id)
		wantFinished(t, r, "stop")
		got = append(got, r.Text)
	}
	slices.Sort(got)
	if !slices.Equal(got, texts) {
		t.Fatalf("streams got %q, want each of %q once", got, texts)
	}
	if n := len(s.h.Requests()); n != 3 {
		t.Fatalf("model received %d requests, want 3", n)
	}
}

func testFollowUpOnSameStream(t *testing.T, nh NewFunc) {
	calls := []scripted.ToolCall{{ID: "call_1", Name: "read_file", Arguments: `{"path":"a"}`}}
	s := start(t, nh, scripted.Turn{ToolCalls: calls}, scripted.Turn{Text: "The file says hi."})
	s.send("s1")
	wantCalls(t, s.read("s1"), calls)
	result, err := messages.ToolResult("s1", "call_1", "read_file", map[string]string{"content": "hi"})
	if err != nil {
		t.Fatal(err)
	}
	followUp := json.RawMessage(`[{"role":"user","content":"Read a"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"{\"content\":\"hi\"}"}]`)
	if err := s.conn.SendAll(result,
		messages.RawParam("s1", models.ParamMessages, followUp),
		messages.RawParam("s1", models.ParamTools, toolsParam),
		messages.End("s1")); err != nil {
		t.Fatal(err)
	}
	r := s.read("s1")
	wantFinished(t, r, "stop")
	if r.Text != "The file says hi." {
		t.Fatalf("follow-up text %q", r.Text)
	}
	reqs := s.h.Requests()
	if len(reqs) != 2 || !JSONEqual(reqs[1][models.ParamMessages], followUp) {
		t.Fatalf("model's second request: %d requests, messages %s", len(reqs), reqs[len(reqs)-1][models.ParamMessages])
	}
}
