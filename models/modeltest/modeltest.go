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
//
// It also holds what the HTTP adapters' own tests share: [Rig], an adapter
// on an httptest server in a real runtime; [AnswerOrReject] and
// [StreamBody], handlers of such a server; [RunLoop], [Transcript] and
// [CheckLengthCutLoop], for tool loops around an adapter.
package modeltest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/internal/urlredact"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/internal/httpadapter"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/workspace"
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

// Handler answers the n-th request (from 0) a [Rig]'s server receives;
// body is the request's JSON body.
type Handler func(n int, w http.ResponseWriter, r *http.Request, body map[string]json.RawMessage)

// StreamBody returns a handler answering every request with body, SSE
// bytes as they are.
func StreamBody(body string) Handler {
	return func(_ int, w http.ResponseWriter, _ *http.Request, _ map[string]json.RawMessage) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, body)
	}
}

// proxyPage is the sign-in page of [SignInPage]: its start names it, and
// it is too long to quote whole.
var proxyPage = "<!DOCTYPE html><html><head><title>Sign in to the corporate proxy</title></head><body>" +
	strings.Repeat("<p>Please authenticate before using the internet.</p>", 100) + "<p>END OF PAGE</p></body></html>"

// SignInPage returns a handler answering every request with HTTP 200 and
// a long HTML page, as a proxy asking to sign in does.
func SignInPage() Handler {
	return func(_ int, w http.ResponseWriter, _ *http.Request, _ map[string]json.RawMessage) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, proxyPage)
	}
}

// WantNotEventStream checks that r, the answer to [SignInPage], failed
// with notStream, naming the content type and quoting the start of the
// page but not all of it, and not as incomplete (a stream cut off). The
// error has the context of the adapter's other errors of the request
// (it begins "request: ", as the failure of the request itself does).
func WantNotEventStream(t testing.TB, r *models.Response, notStream, incomplete error) {
	t.Helper()
	if want := "request: " + notStream.Error(); !strings.Contains(r.Error, want) {
		t.Errorf("failed %v with %q, want it to hold %q: the context of the adapter's other errors of the request", r.Failed, r.Error, want)
	}
	if !r.Failed || !strings.Contains(r.Error, notStream.Error()) || !strings.Contains(r.Error, "text/html") ||
		!strings.Contains(r.Error, "Sign in to the corporate proxy") {
		t.Fatalf("failed %v with %q, want the content type and the start of the page", r.Failed, r.Error)
	}
	if strings.Contains(r.Error, "END OF PAGE") || len(r.Error) > 600 {
		t.Errorf("error of %d bytes holds the whole page: %q", len(r.Error), r.Error)
	}
	if strings.Contains(r.Error, incomplete.Error()) {
		t.Errorf("error %q calls the page a cut-off stream", r.Error)
	}
}

// gatewayPage is the error page of [GatewayErrorPage]: its start names
// it, it holds bytes that are not UTF-8 (a Latin-1 page), and it is too
// long to quote whole.
var gatewayPage = "<html><head><title>502 Bad Gateway</title></head><body>upstream caf\xe9 unreachable " +
	strings.Repeat("<p>The proxy could not reach the upstream server.</p>", 400) + "<p>END OF PAGE</p></body></html>"

// GatewayErrorPage returns a handler answering every request with HTTP
// 502 and a long HTML page in Latin-1, as a proxy whose upstream is down
// does: a body that is not the API's error.
func GatewayErrorPage() Handler {
	return func(_ int, w http.ResponseWriter, _ *http.Request, _ map[string]json.RawMessage) {
		w.Header().Set("Content-Type", "text/html; charset=iso-8859-1")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, gatewayPage)
	}
}

// RedirectAway returns a handler answering every request with a
// redirect of status to another origin (a host that is never reached),
// which an adapter's client refuses rather than follow.
func RedirectAway(status int) Handler {
	return func(_ int, w http.ResponseWriter, r *http.Request, _ map[string]json.RawMessage) {
		http.Redirect(w, r, "https://elsewhere.invalid/v1", status)
	}
}

// WantRedirectRefusedOnce checks that r, the answer of rg's adapter (one
// that retries, MaxRetries above zero) to [RedirectAway], failed saying
// the server redirected the request to another origin, after the one
// request the server got: the refusal is permanent, and no retry sends
// the prompt again.
func WantRedirectRefusedOnce(t testing.TB, rg *Rig, r *models.Response) {
	t.Helper()
	if !r.Failed || !strings.Contains(r.Error, "redirected the POST") || !strings.Contains(r.Error, "to another origin") {
		t.Errorf("failed %v with %q, want the refused redirect", r.Failed, r.Error)
	}
	if n := rg.Requests(); n != 1 {
		t.Errorf("the server got %d requests; want 1: a refused redirect is not retried", n)
	}
}

// RedirectLoop returns a handler answering every request with a 307
// redirect to its own URL, on its own origin: a loop, which an adapter's
// client follows until it stops, after 10 redirects.
func RedirectLoop() Handler {
	return func(_ int, w http.ResponseWriter, r *http.Request, _ map[string]json.RawMessage) {
		http.Redirect(w, r, r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}
}

// WantRedirectLoopStoppedOnce checks that r, the answer of rg's adapter
// (one that retries, MaxRetries above zero) to [RedirectLoop], failed
// saying the client stopped after 10 redirects, after the 10 requests
// of the one attempt (the first and the 9 redirects it followed): a
// loop does not end by sending the request again. http.Client gives
// the SDK the last redirect's response with its error, a status the
// SDKs do not retry.
func WantRedirectLoopStoppedOnce(t testing.TB, rg *Rig, r *models.Response) {
	t.Helper()
	if !r.Failed || !strings.Contains(r.Error, "stopped after 10 redirects") {
		t.Errorf("failed %v with %q, want the redirects stopped", r.Failed, r.Error)
	}
	if n := rg.Requests(); n != 10 {
		t.Errorf("the server got %d requests; want 10: a redirect loop is not retried", n)
	}
}

// movedPath is where [RedirectHere] points its redirects, with
// movedToken in the query of the Location.
const (
	movedPath  = "/moved"
	movedToken = "moved-token-0123456789"
)

// RedirectHere returns a handler answering a request with a redirect of
// status to another path of the server's own origin (a token in the
// query of its Location), and a request there with body, SSE bytes of a
// valid answer: what an adapter following the redirect would read as the
// model's reply.
func RedirectHere(status int, body string) Handler {
	return func(n int, w http.ResponseWriter, r *http.Request, b map[string]json.RawMessage) {
		if r.URL.Path == movedPath {
			StreamBody(body)(n, w, r, b)
			return
		}
		http.Redirect(w, r, movedPath+"?sig="+movedToken, status)
	}
}

// WantRedirectHereRefused checks that r, the answer of rg's adapter (one
// that retries, MaxRetries above zero) to [RedirectHere] with status 301,
// 302 or 303, which http.Client would follow with a GET without the
// prompt, failed saying so, with the status and the Location (the values
// of its query cut), after the one request the server got, a POST to
// path: none reached the Location, and no retry sent the prompt again.
func WantRedirectHereRefused(t testing.TB, rg *Rig, r *models.Response, status int, path string) {
	t.Helper()
	want := fmt.Sprintf("the server redirected the POST with HTTP %d %s to %s%s?sig=%s, which would send it on as a GET without its body",
		status, http.StatusText(status), rg.URL, movedPath, urlredact.Mark)
	if !r.Failed || !strings.Contains(r.Error, want) {
		t.Errorf("failed %v with %q (text %q), want the refused redirect: %q", r.Failed, r.Error, r.Text, want)
	}
	if strings.Contains(r.Error, movedToken) {
		t.Errorf("error %q shows the token of the Location's query", r.Error)
	}
	if got := rg.Requested(); !slices.Equal(got, []string{"POST " + path}) {
		t.Errorf("the server got %q; want one POST %s: the redirect is neither followed nor retried", got, path)
	}
}

// WantRedirectHereFollowed checks that r, the answer of rg's adapter to
// [RedirectHere] with status 307 or 308, which keep the method and the
// body, is the answer at the Location, text, got by a POST of the same
// body as the one to path.
func WantRedirectHereFollowed(t testing.TB, rg *Rig, r *models.Response, path, text string) {
	t.Helper()
	if r.Failed || r.Text != text {
		t.Errorf("failed %v with %q, text %q; want the answer at the Location, %q", r.Failed, r.Error, r.Text, text)
	}
	if got, want := rg.Requested(), []string{"POST " + path, "POST " + movedPath}; !slices.Equal(got, want) {
		t.Fatalf("the server got %q; want %q", got, want)
	}
	first, _ := json.Marshal(rg.Body(0))
	second, _ := json.Marshal(rg.Body(1))
	if !JSONEqual(first, second) {
		t.Errorf("the redirect sent %s; want the first request's body, %s", second, first)
	}
}

// WantStatusDescribed checks that r, the answer to [GatewayErrorPage]
// from a server reached at a base URL holding the user info
// "user:"+password, failed with an error that says the status, the
// method and path requested (path) and the start of the page, within a
// few hundred bytes of valid UTF-8, and without the password.
func WantStatusDescribed(t testing.TB, r *models.Response, path, password string) {
	t.Helper()
	if !r.Failed || !strings.Contains(r.Error, "HTTP 502") || !strings.Contains(r.Error, "POST ") || !strings.Contains(r.Error, path) ||
		!strings.Contains(r.Error, "502 Bad Gateway</title>") {
		t.Errorf("failed %v with %.300q, want the status, the request and the start of the page", r.Failed, r.Error)
	}
	if strings.Contains(r.Error, password) {
		t.Errorf("error %.300q holds the password of the base URL", r.Error)
	}
	if strings.Contains(r.Error, "END OF PAGE") || len(r.Error) > 600 {
		t.Errorf("error of %d bytes holds the whole page: %.300q", len(r.Error), r.Error)
	}
	if !utf8.ValidString(r.Error) {
		t.Errorf("error %.300q is not valid UTF-8: an ERROR frame's text must be", r.Error)
	}
}

// EchoKey returns a handler answering every request with HTTP 401 and
// the provider's error body (written by writeError) whose message quotes
// the request's Authorization (or x-api-key) header, as some gateways'
// do.
func EchoKey(writeError func(w http.ResponseWriter, message string)) Handler {
	return func(_ int, w http.ResponseWriter, r *http.Request, _ map[string]json.RawMessage) {
		writeError(w, "Incorrect API key provided: "+r.Header.Get("Authorization")+r.Header.Get("X-Api-Key")+" (see your account)")
	}
}

// WantKeyRedacted checks that r, the answer to [EchoKey] from an adapter
// with the API key key, failed with the server's message but without the
// key.
func WantKeyRedacted(t testing.TB, r *models.Response, key string) {
	t.Helper()
	if !r.Failed || !strings.Contains(r.Error, "HTTP 401") || !strings.Contains(r.Error, "Incorrect API key provided") ||
		!strings.Contains(r.Error, "(see your account)") {
		t.Fatalf("failed %v with %q, want the status and the server's message", r.Failed, r.Error)
	}
	if strings.Contains(r.Error, key) {
		t.Fatalf("error %q holds the API key", r.Error)
	}
}

// BasicAuthUser and BasicAuthPassword are the user info [WithBasicAuth]
// puts in a base URL.
const (
	BasicAuthUser     = "gateway"
	BasicAuthPassword = "correct-horse-battery"
)

// WithBasicAuth returns url with the user info BasicAuthUser and
// BasicAuthPassword, which the HTTP client sends as basic auth.
func WithBasicAuth(url string) string {
	return strings.Replace(url, "://", "://"+BasicAuthUser+":"+BasicAuthPassword+"@", 1)
}

// EchoBasicAuth returns a handler answering every request with HTTP 401
// and the provider's error body (written by writeError) whose message
// quotes the request's Authorization header and the password of its
// basic auth, as some gateways' do.
func EchoBasicAuth(writeError func(w http.ResponseWriter, message string)) Handler {
	return func(_ int, w http.ResponseWriter, r *http.Request, _ map[string]json.RawMessage) {
		_, password, _ := r.BasicAuth()
		writeError(w, "Incorrect API key provided: "+r.Header.Get("Authorization")+" (password "+password+") (see your account)")
	}
}

// WantBasicAuthRedacted checks that r, the answer to [EchoBasicAuth] from
// an adapter whose base URL came from [WithBasicAuth], failed with the
// server's message but without the password, plain or in the base64 of
// the Authorization header.
func WantBasicAuthRedacted(t testing.TB, r *models.Response) {
	t.Helper()
	WantKeyRedacted(t, r, BasicAuthPassword)
	if !strings.Contains(r.Error, "Basic ") {
		t.Fatalf("error %q: the server did not get basic auth", r.Error)
	}
	if basic := base64.StdEncoding.EncodeToString([]byte(BasicAuthUser + ":" + BasicAuthPassword)); strings.Contains(r.Error, basic) {
		t.Fatalf("error %q holds the basic auth %q", r.Error, basic)
	}
}

// EchoKeyAtClip returns a handler answering every request with HTTP
// 502 and a plain-text page (not the API's error) that quotes the
// request's key (the bearer token or x-api-key) so that it straddles the
// end of what an error quotes of a body.
func EchoKeyAtClip() Handler {
	return func(_ int, w http.ResponseWriter, r *http.Request, _ map[string]json.RawMessage) {
		key := cmp.Or(r.Header.Get("X-Api-Key"), strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, strings.Repeat("-", 172)+key+" was refused upstream")
	}
}

// WantNoKeyPart checks that r failed with an error holding no 8 bytes
// in a row of key beyond its first 8 (a public prefix such as
// "sk-proj-").
func WantNoKeyPart(t testing.TB, r *models.Response, key string) {
	t.Helper()
	if !r.Failed || !strings.Contains(r.Error, "HTTP 502") {
		t.Fatalf("failed %v with %q, want the status", r.Failed, r.Error)
	}
	for i := 8; i+8 <= len(key); i++ {
		if strings.Contains(r.Error, key[i:i+8]) {
			t.Fatalf("error %q holds %q of the API key", r.Error, key[i:i+8])
		}
	}
}

// AnswerOrReject returns a handler that streams turns[n] (SSE bytes as
// they are), unless check finds fault with the follow-up (request 1):
// then it sets *failed to check's error and answers with reject. A
// request past the last turn gets HTTP 500.
func AnswerOrReject(turns []string, check func(body map[string]json.RawMessage) error, failed *error, reject func(w http.ResponseWriter, err error)) Handler {
	return func(n int, w http.ResponseWriter, r *http.Request, body map[string]json.RawMessage) {
		if n == 1 {
			if err := check(body); err != nil {
				*failed = err
				reject(w, err)
				return
			}
		}
		if n >= len(turns) {
			http.Error(w, "no more turns", http.StatusInternalServerError)
			return
		}
		StreamBody(turns[n])(n, w, r, body)
	}
}

// Rig is an adapter under test talking to an httptest server, in a real
// actor runtime. Create it with [NewRig].
type Rig struct {
	// Conn is the adapter's connection; Ctx bounds a test's reads.
	Conn *actors.Conn
	Ctx  context.Context
	// URL and Client reach the server, for more adapters on it.
	URL    string
	Client *http.Client

	t      testing.TB
	mu     sync.Mutex
	bodies []map[string]json.RawMessage
	heads  []http.Header
	lines  []string // method and path
}

// NewRig registers a check for leaked goroutines (it runs last), starts a
// server whose n-th request handle answers, and serves (see [Serve]) the
// adapter that adapter makes for the server's URL and client; reads get
// 10 s.
func NewRig(t *testing.T, handle Handler, adapter func(url string, client *http.Client) actors.Spec) *Rig {
	t.Helper()
	return newRig(t, handle, adapter, false)
}

// NewMemRig is [NewRig] with the server reached over an in-memory
// network (net.Pipe) instead of TCP, so that the rig can run inside a
// testing/synctest bubble: its timers, and the adapter's bounds and
// waits, then run on the bubble's fake clock, and a test of a bound
// takes no real time and cannot be tripped by a loaded machine. The
// server is an httptest server all the same, speaking HTTP/1.1 with the
// exact bytes its handler writes. Call it inside the bubble.
func NewMemRig(t *testing.T, handle Handler, adapter func(url string, client *http.Client) actors.Spec) *Rig {
	t.Helper()
	return newRig(t, handle, adapter, true)
}

func newRig(t *testing.T, handle Handler, adapter func(url string, client *http.Client) actors.Spec, inMemory bool) *Rig {
	t.Helper()
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
	rg := &Rig{t: t}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]json.RawMessage
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Errorf("request body: %v", err)
		}
		rg.mu.Lock()
		n := len(rg.bodies)
		rg.bodies = append(rg.bodies, body)
		rg.heads = append(rg.heads, r.Header.Clone())
		rg.lines = append(rg.lines, r.Method+" "+r.URL.Path)
		rg.mu.Unlock()
		handle(n, w, r, body)
	})
	if inMemory {
		l := newPipeListener()
		srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: h}}
		srv.Start()
		t.Cleanup(srv.Close)
		rg.URL, rg.Client = srv.URL, &http.Client{Transport: &http.Transport{DialContext: l.dial}}
		t.Cleanup(rg.Client.CloseIdleConnections) // before the server closes
	} else {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		rg.URL, rg.Client = srv.URL, srv.Client()
	}
	rg.Conn, rg.Ctx = Serve(t, adapter(rg.URL, rg.Client), 10*time.Second)
	return rg
}

// Serve starts spec in a runtime of its own ([Runtime]) and returns its
// connection and a context that ends after within, or when t ends.
func Serve(t testing.TB, spec actors.Spec, within time.Duration) (*actors.Conn, context.Context) {
	t.Helper()
	conn, err := Runtime(t).Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	t.Cleanup(cancel)
	return conn, ctx
}

// Ask sends a request made of params on stream and reads the answer,
// failing the test when it breaks the contract.
func (rg *Rig) Ask(stream string, params ...models.Param) *models.Response {
	rg.t.Helper()
	_, r := rg.AskFrames(stream, params...)
	return r
}

// Requests is how many requests the server has received.
func (rg *Rig) Requests() int {
	rg.mu.Lock()
	defer rg.mu.Unlock()
	return len(rg.bodies)
}

// Requested is the method and path of each request the server has
// received, in arrival order ("POST /v1/messages").
func (rg *Rig) Requested() []string {
	rg.mu.Lock()
	defer rg.mu.Unlock()
	return slices.Clone(rg.lines)
}

// Body returns the body of request n, failing the test when the server
// has received fewer.
func (rg *Rig) Body(n int) map[string]json.RawMessage {
	rg.t.Helper()
	body, _ := rg.request(n)
	return body
}

// Header returns the header of request n, failing the test when the
// server has received fewer.
func (rg *Rig) Header(n int) http.Header {
	rg.t.Helper()
	_, header := rg.request(n)
	return header
}

func (rg *Rig) request(n int) (map[string]json.RawMessage, http.Header) {
	rg.t.Helper()
	rg.mu.Lock()
	defer rg.mu.Unlock()
	if n >= len(rg.bodies) {
		rg.t.Fatalf("server got %d requests, want at least %d", len(rg.bodies), n+1)
	}
	return rg.bodies[n], rg.heads[n]
}

// Param is a request parameter with a raw JSON value.
func Param(name, value string) models.Param {
	return models.Param{Name: name, Value: json.RawMessage(value)}
}

// WantCall is a tool call a test expects: its id, name and arguments
// (JSON, compared as values).
type WantCall = struct{ ID, Name, Args string }

// CheckCalls checks got against want: as many calls (or the test stops),
// and each with want's id, name and arguments at index first plus its
// position. what names the calls in messages ("call", "truncated call").
func CheckCalls(t testing.TB, what string, got []models.ToolCall, want []WantCall, first int) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%ss %+v, want %+v", what, got, want)
	}
	for i, w := range want {
		g := got[i]
		if g.ID != w.ID || g.Name != w.Name || g.Index != first+i || !JSONEqual(g.Arguments, []byte(w.Args)) {
			t.Errorf("%s %d = {%d %s %s %s}, want {%d %s %s %s}", what, i, g.Index, g.ID, g.Name, g.Arguments, first+i, w.ID, w.Name, w.Args)
		}
	}
}

// WantFailed checks that r failed with an ERROR saying each of says,
// with no calls and no finish reason; the test stops when not.
func WantFailed(t testing.TB, r *models.Response, says ...string) {
	t.Helper()
	if !r.Failed || len(r.ToolCalls) != 0 || r.Finish != "" {
		t.Fatalf("failed %v %q, calls %+v, finish %q: want ERROR %q and no calls", r.Failed, r.Error, r.ToolCalls, r.Finish, says)
	}
	for _, s := range says {
		if !strings.Contains(r.Error, s) {
			t.Fatalf("ERROR %q does not say %q", r.Error, s)
		}
	}
}

// Must takes what a constructor such as anthropic.New returns and gives
// a function that returns the value, or stops the test t when the error
// is not nil: modeltest.Must(openai.New(opts))(t).
func Must[T any](v T, err error) func(t testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// RunLoop runs a tool loop (tools.NewLoop) with toolset around the
// adapter spec, in a runtime of its own ([Runtime]), sends ask as the
// user's message on stream s1, and returns the frames of the stream up to
// its END, read within ctx.
func RunLoop(t testing.TB, ctx context.Context, spec actors.Spec, toolset []*tools.Tool, ask string) []*messages.Frame {
	t.Helper()
	loop, err := tools.NewLoop(spec, &tools.LoopOptions{RouterOptions: tools.RouterOptions{Tools: toolset}})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := Runtime(t).Start(loop)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := json.Marshal([]struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}{{"user", ask}})
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.SendAll(messages.RawParam("s1", "messages", msgs), messages.End("s1")); err != nil {
		t.Fatal(err)
	}
	frames, err := conn.RecvStream(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	return frames
}

// WorkspaceTools returns the tools of a workspace on dir, sandbox off,
// closed when t ends.
func WorkspaceTools(t testing.TB, dir string) []*tools.Tool {
	t.Helper()
	ws, err := workspace.New(dir, &workspace.Options{Sandbox: workspace.SandboxOff})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	wsTools, err := workspace.Tools(ws)
	if err != nil {
		t.Fatal(err)
	}
	return wsTools
}

// Transcript is a loop's frames in short: "text T", "TYPE id payload"
// (TOOL_CALL, TOOL_RESULT; ERROR with its text) and "END".
func Transcript(frames []*messages.Frame) []string {
	return transcript(frames, func(f *messages.Frame) string {
		return fmt.Sprintf("%s %s %s%s", f.GetType(), f.GetToolCallId(), f.GetPayload(), f.GetText())
	})
}

// ResultTranscript is a loop's frames with how each result failed: "call
// id payload", "result id error=B kind=K", "text T", "ERROR T" and "END".
func ResultTranscript(frames []*messages.Frame) []string {
	return transcript(frames, func(f *messages.Frame) string {
		switch f.GetType() {
		case messages.FrameType_TOOL_CALL:
			return fmt.Sprintf("call %s %s", f.GetToolCallId(), f.GetPayload())
		case messages.FrameType_TOOL_RESULT:
			return fmt.Sprintf("result %s error=%v kind=%s", f.GetToolCallId(), f.IsErrorResult(), f.GetMeta().GetFailureKind())
		}
		return "ERROR " + f.GetText()
	})
}

// transcript lists TEXT as "text T", END as "END", and TOOL_CALL,
// TOOL_RESULT and ERROR as call says; it leaves other frames out.
func transcript(frames []*messages.Frame, call func(*messages.Frame) string) []string {
	var got []string
	for _, f := range frames {
		switch f.GetType() {
		case messages.FrameType_TEXT:
			got = append(got, "text "+f.GetText())
		case messages.FrameType_TOOL_CALL, messages.FrameType_TOOL_RESULT, messages.FrameType_ERROR:
			got = append(got, call(f))
		case messages.FrameType_END:
			got = append(got, "END")
		}
	}
	return got
}

// WantTranscript checks a loop's transcript against want, then that
// server (the fake model's verdict on the requests it received) is nil;
// the test stops when not.
func WantTranscript(t testing.TB, got []string, server func() error, want ...string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("loop output\n got  %q\n want %q\nserver: %v", got, want, server())
	}
	if err := server(); err != nil {
		t.Fatal(err)
	}
}

// CheckLengthCutLoop runs the loop of a length-cut call: with the
// workspace tools of a fresh directory around spec, it asks to write
// big.txt while the model's first answer ("Writing the file.") is cut by
// the length limit in the middle of write_file call callID, and its
// second says "I will write it in parts.". The cut call must be answered
// as a failed result of kind truncated without running (the directory
// stays empty), and server (the fake model's verdict on the follow-up it
// received) must be nil.
func CheckLengthCutLoop(t *testing.T, ctx context.Context, spec actors.Spec, callID string, server func() error) {
	t.Helper()
	dir := t.TempDir()
	got := ResultTranscript(RunLoop(t, ctx, spec, WorkspaceTools(t, dir), "Write big.txt"))
	WantTranscript(t, got, server, "text Writing the file.", "call "+callID+" {}", "result "+callID+" error=true kind=truncated", "text I will write it in parts.", "END")
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Fatalf("workspace holds %v (%v): the cut call ran", entries, err)
	}
}

// EchoKeyInLongMessage returns a handler that answers with writeError
// and a message far longer than an error text keeps, which quotes the
// key the request was sent with across the point where the text clips
// the message.
func EchoKeyInLongMessage(writeError func(w http.ResponseWriter, message string)) Handler {
	return func(_ int, w http.ResponseWriter, r *http.Request, _ map[string]json.RawMessage) {
		key := cmp.Or(r.Header.Get("X-Api-Key"), strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		writeError(w, "Denied:"+strings.Repeat("-", httpadapter.MessageQuote-27)+key+strings.Repeat(" trace", 20000))
	}
}

// WantLongMessageClipped checks that r, the answer to
// [EchoKeyInLongMessage] from an adapter with the API key key, failed
// with an error holding want and the start of the message, but not all
// of it, nor 8 bytes in a row of key beyond its first 8.
func WantLongMessageClipped(t testing.TB, r *models.Response, want, key string) {
	t.Helper()
	if !r.Failed || !strings.Contains(r.Error, want) || !strings.Contains(r.Error, "Denied:---") {
		t.Fatalf("failed %v with %.300q…, want %q and the message's start", r.Failed, r.Error, want)
	}
	if len(r.Error) > httpadapter.MessageQuote+500 {
		t.Fatalf("error of %d bytes, want the message's start only: %.300q…", len(r.Error), r.Error)
	}
	for i := 8; i+8 <= len(key); i++ {
		if strings.Contains(r.Error, key[i:i+8]) {
			t.Fatalf("error %q holds %q of the API key", r.Error, key[i:i+8])
		}
	}
}

// EchoCredentials returns a handler answering every request with HTTP
// 401 and the provider's error body (written by writeError) whose message
// quotes each credential the request carried: the Authorization,
// X-Api-Key and Api-Key headers and the query string, as some gateways'
// do.
func EchoCredentials(writeError func(w http.ResponseWriter, message string)) Handler {
	return func(_ int, w http.ResponseWriter, r *http.Request, _ map[string]json.RawMessage) {
		writeError(w, fmt.Sprintf("Incorrect API key provided: %q %q %q in %q (see your account)",
			r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"), r.Header.Get("Api-Key"), r.URL.RawQuery))
	}
}

// WantCredentialsRedacted checks that r, the answer to [EchoCredentials],
// failed with the server's message but without any of secrets.
func WantCredentialsRedacted(t testing.TB, r *models.Response, secrets ...string) {
	t.Helper()
	if !r.Failed || !strings.Contains(r.Error, "HTTP 401") || !strings.Contains(r.Error, "Incorrect API key provided") ||
		!strings.Contains(r.Error, "(see your account)") {
		t.Fatalf("failed %v with %q, want the status and the server's message", r.Failed, r.Error)
	}
	for _, s := range secrets {
		if strings.Contains(r.Error, s) {
			t.Errorf("error %q holds the credential %q", r.Error, s)
		}
	}
}

// HangUp returns a handler that closes the connection of every request
// without answering, so that the client fails with the request's URL
// in its error.
func HangUp() Handler {
	return func(_ int, w http.ResponseWriter, _ *http.Request, _ map[string]json.RawMessage) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		_ = conn.Close()
	}
}

// WantURLWithoutCredentials checks that r, the answer to [HangUp], failed
// naming the request's path but without any of secrets (carried in its
// query).
func WantURLWithoutCredentials(t testing.TB, r *models.Response, path string, secrets ...string) {
	t.Helper()
	if !r.Failed || !strings.Contains(r.Error, path) {
		t.Fatalf("failed %v with %q, want the path requested", r.Failed, r.Error)
	}
	for _, s := range secrets {
		if strings.Contains(r.Error, s) {
			t.Errorf("error %q holds the credential %q", r.Error, s)
		}
	}
}

// pipeListener is a net.Listener whose connections are the server ends
// of net.Pipe pairs: dial makes one and returns the client end.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// dial is the DialContext of the clients of l: any address reaches l.
func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.closed:
		err := net.ErrClosed
		_, _ = client.Close(), server.Close()
		return nil, err
	case <-ctx.Done():
		_, _ = client.Close(), server.Close()
		return nil, ctx.Err()
	}
}

// pipeAddr is the address of a pipeListener: the host of the rig's URL.
type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "model.test" }

// KeepAlive returns a handler that streams first, then keepAlive every
// tick for the length of hold (for ever when hold is 0), then last: a
// server keeping a stream alive (SSE comments, ping events) while the
// model thinks. It stops when the request ends.
func KeepAlive(first, keepAlive, last string, tick, hold time.Duration) Handler {
	return func(_ int, w http.ResponseWriter, r *http.Request, _ map[string]json.RawMessage) {
		w.Header().Set("Content-Type", "text/event-stream")
		flush := func(s string) { _, _ = io.WriteString(w, s); w.(http.Flusher).Flush() }
		flush(first)
		ticker := time.NewTicker(tick)
		defer ticker.Stop()
		for end := time.Now().Add(hold); hold == 0 || time.Now().Before(end); {
			select {
			case <-r.Context().Done():
				return
			case <-ticker.C:
				flush(keepAlive)
			}
		}
		flush(last)
	}
}
