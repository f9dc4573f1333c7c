package inspect_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/inspect"
	"github.com/polyweave/polyweave-go/internal/loopback"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/supervisor"
	"github.com/polyweave/polyweave-go/tools"
)

type echoIn struct {
	X int `json:"x"`
}

type echoOut struct {
	X int `json:"x"`
}

// rig is a runtime with an inspector, a tool loop ("agent") around a
// scripted model and an "echo" tool, and the inspector served over HTTP.
type rig struct {
	rt   *actors.Runtime
	in   *inspect.Inspector
	conn *actors.Conn
	srv  *httptest.Server
}

// inspected returns a runtime made with rtOpts and an inspector of it
// made with opts, both closed when the test ends.
func inspected(t *testing.T, rtOpts *actors.RuntimeOptions, opts *inspect.Options) (*actors.Runtime, *inspect.Inspector) {
	t.Helper()
	rt := actorstest.NewRuntime(t, rtOpts)
	in, err := inspect.New(rt, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	return rt, in
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newRig starts it all; model, when not zero, replaces the scripted
// model (a tool call to echo, then "done").
func newRig(t *testing.T, opts *inspect.Options, model actors.Spec) *rig {
	t.Helper()
	return newApprovalRig(t, opts, model, nil)
}

// newApprovalRig is newRig with an approval policy, watched by the
// inspector.
func newApprovalRig(t *testing.T, opts *inspect.Options, model actors.Spec, approval *tools.ApprovalOptions) *rig {
	t.Helper()
	rt := actorstest.NewRuntime(t, nil)
	in, err := inspect.New(rt, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(in)
	t.Cleanup(srv.Close)
	t.Cleanup(in.Close) // first: ends the event streams
	if model.New == nil {
		m := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
			{Text: "Let me echo.", ToolCalls: []scripted.ToolCall{{ID: "call_1", Name: "echo", Arguments: `{"x":7}`}}},
			{Text: "done"},
		}}, nil)
		model = m.Spec("model")
	}
	echo := tools.MustNewTyped(tools.Definition{Name: "echo", Description: "echoes x"},
		func(_ context.Context, in echoIn) (echoOut, error) { return echoOut(in), nil })
	toolset, err := in.Tools([]*tools.Tool{echo})
	if err != nil {
		t.Fatal(err)
	}
	loop, err := tools.NewLoop(in.Model(model), &tools.LoopOptions{
		RouterOptions: tools.RouterOptions{Name: "agent", Tools: toolset},
		OnToolResult:  in.OnToolResult,
		Approval:      in.Approval(approval),
	})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := rt.Start(loop)
	if err != nil {
		t.Fatal(err)
	}
	return &rig{rt: rt, in: in, conn: conn, srv: srv}
}

// ask sends a one-message conversation on stream.
func (r *rig) ask(t *testing.T, stream, text string) {
	t.Helper()
	msgs := models.EncodeMessages([]models.Message{models.UserMessage(text)})
	if err := r.conn.SendAll(messages.RawParam(stream, models.ParamMessages, msgs), messages.End(stream)); err != nil {
		t.Fatal(err)
	}
}

// converse asks and reads the stream to its END.
func (r *rig) converse(t *testing.T, stream, text string) []*messages.Frame {
	t.Helper()
	r.ask(t, stream, text)
	frames, err := r.conn.RecvStream(testCtx(t), stream)
	if err != nil {
		t.Fatal(err)
	}
	return frames
}

func (r *rig) get(t *testing.T, path string) (*http.Response, string) {
	t.Helper()
	resp, err := r.srv.Client().Get(r.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

func (r *rig) state(t *testing.T, session string) inspect.Snapshot {
	t.Helper()
	resp, body := r.get(t, "/api/state?session="+url.QueryEscape(session))
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /api/state: %s %s", resp.Status, body)
	}
	var snap inspect.Snapshot
	if err := json.Unmarshal([]byte(body), &snap); err != nil {
		t.Fatal(err)
	}
	return snap
}

// post posts a fault form as the page's script does (JSON answer), from
// the page's origin unless header says where it comes from.
func (r *rig) post(t *testing.T, path string, form url.Values, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, r.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if header.Get("Origin") == "" && header.Get("Sec-Fetch-Site") == "" {
		req.Header.Set("Origin", r.srv.URL)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := r.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// events follows /api/events (query appended) until the test ends.
type events struct {
	t    *testing.T
	ctx  context.Context // the stream's: its deadline bounds every wait on it
	r    *bufio.Reader
	body io.Closer
	want string // what until waits for, shown when the stream fails
	last string // the newest event's data, shown when the stream fails
}

func (r *rig) events(t *testing.T, query string) *events {
	t.Helper()
	ctx, cancel := context.WithCancel(testCtx(t))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.srv.URL+"/api/events"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := r.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET /api/events: %s, %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	return &events{t: t, ctx: ctx, r: bufio.NewReader(resp.Body), body: resp.Body}
}

// next reads the next event (comments and retry lines skipped).
func (e *events) next() (name, data string) {
	e.t.Helper()
	for {
		line, err := e.r.ReadString('\n')
		if err != nil {
			if e.want != "" {
				e.t.Fatalf("no snapshot with %s: event stream: %v; last %s", e.want, err, e.last)
			}
			e.t.Fatalf("event stream: %v; last %s", err, e.last)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "" && name != "":
			return name, data
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data += strings.TrimPrefix(line, "data: ")
		}
	}
}

// until reads snapshot events until cond holds for one, before the
// stream's deadline (testCtx's, for all the waits on it together).
func (e *events) until(what string, cond func(inspect.Snapshot) bool) inspect.Snapshot {
	e.t.Helper()
	e.want = what
	defer func() { e.want = "" }()
	for {
		name, data := e.next()
		if name != "snapshot" {
			e.t.Fatalf("event %q, want snapshot", name)
		}
		var snap inspect.Snapshot
		e.last = data
		if err := json.Unmarshal([]byte(data), &snap); err != nil {
			e.t.Fatalf("snapshot event: %v", err)
		}
		if cond(snap) {
			return snap
		}
		if err := e.ctx.Err(); err != nil {
			e.t.Fatalf("no snapshot with %s: %v; last %s", what, err, e.last)
		}
	}
}

// finalText is the text of the stream's last TEXT frame, when it ended
// with END and no ERROR.
func finalText(frames []*messages.Frame) string {
	text := ""
	for _, f := range frames {
		switch f.GetType() {
		case messages.FrameType_TEXT:
			text = f.GetText()
		case messages.FrameType_ERROR:
			return "ERROR " + f.GetText()
		}
	}
	if len(frames) == 0 || frames[len(frames)-1].GetType() != messages.FrameType_END {
		return "no END"
	}
	return text
}

func node(snap inspect.Snapshot, role string) (inspect.Node, bool) {
	for _, n := range snap.Tree {
		if n.Role == role {
			return n, true
		}
	}
	return inspect.Node{}, false
}

func tool(snap inspect.Snapshot, name string) inspect.ToolFigures {
	for _, tf := range snap.Tools {
		if tf.Name == name {
			return tf
		}
	}
	return inspect.ToolFigures{}
}

func TestState_TreeSessionToolsAfterAConversation(t *testing.T) {
	r := newRig(t, nil, actors.Spec{})
	if frames := r.converse(t, "s1", "echo seven"); finalText(frames) != "done" {
		t.Fatalf("conversation: %v", frames)
	}
	snap := r.state(t, "s1")

	if len(snap.Tree) != 4 {
		t.Fatalf("tree %+v, want runtime, agent, model adapter, tool", snap.Tree)
	}
	want := []struct {
		role  string
		depth int
	}{{"runtime", 0}, {"agent", 1}, {"model adapter", 2}, {"tool", 2}}
	roles := map[string]int{}
	for _, n := range snap.Tree {
		roles[n.Role] = n.Depth
		if n.State != "running" || n.Restarts != 0 {
			t.Fatalf("node %+v, want running, no restart", n)
		}
	}
	for _, w := range want {
		if d, ok := roles[w.role]; !ok || d != w.depth {
			t.Fatalf("tree %+v: want a %s at depth %d", snap.Tree, w.role, w.depth)
		}
	}
	if snap.Tree[0].ID != r.rt.Host().Id || snap.Runtime != r.rt.Host().Id {
		t.Fatalf("root %+v, want the runtime's host", snap.Tree[0])
	}

	if len(snap.Sessions) != 1 || snap.Sessions[0].ID != "s1" || !snap.Sessions[0].Answered || snap.Sessions[0].Requests != 2 {
		t.Fatalf("sessions %+v", snap.Sessions)
	}
	d := snap.Session
	if d == nil || d.Answer != "done" || len(d.Pending) != 0 || len(d.Streams) != 0 || d.Durability != nil {
		t.Fatalf("session detail %+v", d)
	}
	// The last request's messages: the user, the assistant's call, the
	// tool's result.
	var roleList []string
	for _, m := range d.Conversation {
		roleList = append(roleList, m.Role)
	}
	if strings.Join(roleList, ",") != "user,assistant,tool" || !strings.Contains(d.Conversation[1].Text, `echo({"x":7})`) ||
		!strings.Contains(d.Conversation[2].Text, `{"x":7}`) || d.Conversation[0].Text != "echo seven" {
		t.Fatalf("conversation %+v", d.Conversation)
	}

	echo := tool(snap, "echo")
	if echo.Calls != 1 || echo.Failures != 0 || echo.Timed != 1 || echo.P50 == "" || echo.P99 == "" || echo.Stallable || echo.Stalled {
		t.Fatalf("echo figures %+v", echo)
	}
	if snap.Faults || snap.Restarts != 0 {
		t.Fatalf("faults %v restarts %d", snap.Faults, snap.Restarts)
	}
}

func TestPage_RendersTheSnapshotAndRefreshesWithoutScript(t *testing.T) {
	r := newRig(t, nil, actors.Spec{})
	r.converse(t, "s1", "echo <b>seven</b>")
	resp, body := r.get(t, "/?session=s1")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET /: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{
		`<noscript><meta http-equiv="refresh" content="2"></noscript>`,
		`<script src="static/app.js" defer></script>`,
		`data-role="agent"`, `data-role="model adapter"`, `data-role="tool"`,
		`data-session="s1"`, `href="?session=s1"`,
		`echo &lt;b&gt;seven&lt;/b&gt;`, // the user's text, escaped
		`assistant (final)`, `data-tool="echo" data-calls="1"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(body, "<b>seven</b>") {
		t.Error("the page has the user's markup unescaped")
	}
	if strings.Contains(body, "data-fault") || strings.Contains(body, "api/fault") {
		t.Error("the page offers fault injection, which the host did not enable")
	}
	if resp, _ := r.get(t, "/nothing-here"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nothing-here: %s, want 404", resp.Status)
	}
	for path, ctype := range map[string]string{"/static/app.js": "text/javascript", "/static/style.css": "text/css"} {
		resp, body := r.get(t, path)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), ctype) || len(body) < 200 {
			t.Errorf("GET %s: %s %s, %d bytes", path, resp.Status, resp.Header.Get("Content-Type"), len(body))
		}
	}
}

func TestEvents_StreamSnapshotsAndFollowRestarts(t *testing.T) {
	r := newRig(t, nil, actors.Spec{})
	ev := r.events(t, "?session=s1")
	// The agent's stages start after it, each on its own: the stream
	// follows them into the tree.
	first := ev.until("the tool in the tree", func(s inspect.Snapshot) bool {
		_, ok := node(s, "tool")
		return ok
	})
	toolNode, _ := node(first, "tool")

	// A conversation shows up live.
	r.converse(t, "s1", "echo seven")
	ev.until("the answered session", func(s inspect.Snapshot) bool {
		return s.Session != nil && s.Session.Answer == "done" && tool(s, "echo").Calls == 1
	})

	// So does a restart: in the tree and in the feed.
	if _, err := r.in.InjectPanic(toolNode.ID); err != nil {
		t.Fatal(err)
	}
	snap := ev.until("the tool restarted", func(s inspect.Snapshot) bool {
		n, _ := node(s, "tool")
		return n.Restarts == 1 && n.State == "running" && s.Restarts == 1
	})
	n, _ := node(snap, "tool")
	if !n.Flash || !strings.Contains(n.LastFailure, "injected from the inspector") {
		t.Fatalf("restarted node %+v: want it flashing, with its failure", n)
	}
	kinds := map[string]bool{}
	for _, it := range snap.Feed {
		if it.Actor == toolNode.ID {
			kinds[it.Kind] = true
		}
	}
	if !kinds["restart"] || !kinds["supervision"] || !kinds["fault"] {
		t.Fatalf("feed %+v: want the fault, the supervisor's decision and the restart", snap.Feed)
	}

	// The page's own stream: its fragments, rendered by the server.
	html := r.events(t, "?view=html&session=s1")
	name, data := html.next()
	var parts map[string]string
	if err := json.Unmarshal([]byte(data), &parts); name != "view" || err != nil {
		t.Fatalf("view event %q: %v", name, err)
	}
	for _, id := range []string{"status", "tree", "sessions", "session", "feed", "tools"} {
		if parts[id] == "" {
			t.Errorf("view event lacks %q", id)
		}
	}
	if !strings.Contains(parts["tree"], `data-restarts="1"`) || !strings.Contains(parts["feed"], `data-kind="restart"`) {
		t.Fatalf("view event: tree %s\nfeed %s", parts["tree"], parts["feed"])
	}
}

func TestFaults_AbsentUnlessEnabled(t *testing.T) {
	r := newRig(t, nil, actors.Spec{})
	host, _ := node(r.state(t, ""), "agent")
	for _, path := range []string{"/api/fault/panic", "/api/fault/stall", "/api/fault/cut"} {
		if code, body := r.post(t, path, url.Values{"actor": {host.ID}, "tool": {"echo"}, "on": {"true"}}, nil); code != http.StatusNotFound {
			t.Errorf("POST %s without Faults: %d %s, want 404", path, code, body)
		}
	}
	if snap := r.state(t, ""); snap.Restarts != 0 || len(snap.Feed) != 0 {
		t.Fatalf("something happened: %+v", snap.Feed)
	}
}

func TestFaults_PanicFromThePage(t *testing.T) {
	r := newRig(t, &inspect.Options{Faults: true}, actors.Spec{})
	// The tree learns of a started actor from its start event: wait for
	// it before reading the page (under load the page could come first).
	ev := r.events(t, "")
	agent, _ := node(ev.until("the agent running", func(s inspect.Snapshot) bool {
		n, ok := node(s, "agent")
		return ok && n.State == "running"
	}), "agent")
	_, page := r.get(t, "/")
	if !strings.Contains(page, `data-fault="panic" data-actor="`+agent.ID+`"`) {
		t.Fatal("the page has no panic button for the agent")
	}

	if code, _ := r.get(t, "/api/fault/panic"); code.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /api/fault/panic: %s, want 405", code.Status)
	}
	if code, body := r.post(t, "/api/fault/panic", url.Values{"actor": {"polyweave/nobody"}}, nil); code != http.StatusNotFound || !strings.Contains(body, "no such duplex") {
		t.Errorf("panic of an unknown actor: %d %s", code, body)
	}
	if code, body := r.post(t, "/api/fault/panic", url.Values{}, nil); code != http.StatusBadRequest {
		t.Errorf("panic without an actor: %d %s", code, body)
	}
	code, body := r.post(t, "/api/fault/panic", url.Values{"actor": {agent.ID}}, http.Header{"Origin": {r.srv.URL}, "Sec-Fetch-Site": {"same-origin"}})
	var out struct {
		OK   bool   `json:"ok"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal([]byte(body), &out); code != http.StatusOK || err != nil || !out.OK {
		t.Fatalf("POST /api/fault/panic: %d %s", code, body)
	}
	ev.until("the agent restarted", func(s inspect.Snapshot) bool {
		n, _ := node(s, "agent")
		return n.Restarts == 1 && n.State == "running"
	})
	// The agent's loop was restarted and works.
	if frames := r.converse(t, "after", "echo again"); finalText(frames) != "done" {
		t.Fatalf("after the restart: %v", frames)
	}

	// Without script: a form post, redirected back to the page.
	req, _ := http.NewRequest(http.MethodPost, r.srv.URL+"/api/fault/panic", strings.NewReader(url.Values{"actor": {agent.ID}, "session": {"after"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", r.srv.URL) // as a browser posting the page's form
	client := *r.srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "../../?session=after" {
		t.Fatalf("form post: %s, Location %q", resp.Status, resp.Header.Get("Location"))
	}
	ev.until("the second restart", func(s inspect.Snapshot) bool {
		n, _ := node(s, "agent")
		return n.Restarts == 2 && n.State == "running"
	})
}

func TestFaults_RefusedFromAnotherSite(t *testing.T) {
	r := newRig(t, &inspect.Options{Faults: true}, actors.Spec{})
	agent, _ := node(r.state(t, ""), "agent")
	for _, h := range []http.Header{
		{"Origin": {"http://evil.example"}},
		{"Sec-Fetch-Site": {"cross-site"}},
	} {
		if code, body := r.post(t, "/api/fault/panic", url.Values{"actor": {agent.ID}}, h); code != http.StatusForbidden {
			t.Errorf("POST with %v: %d %s, want 403", h, code, body)
		}
	}
	if snap := r.state(t, ""); snap.Restarts != 0 {
		t.Fatalf("a refused post restarted something: %+v", snap.Feed)
	}
}

func TestFaults_StallAToolAndRelease(t *testing.T) {
	r := newRig(t, &inspect.Options{Faults: true}, actors.Spec{})
	ev := r.events(t, "?session=s2")
	if code, body := r.post(t, "/api/fault/stall", url.Values{"tool": {"echo"}, "on": {"true"}}, nil); code != http.StatusOK {
		t.Fatalf("stall: %d %s", code, body)
	}
	if code, _ := r.post(t, "/api/fault/stall", url.Values{"tool": {"nope"}, "on": {"true"}}, nil); code != http.StatusNotFound {
		t.Errorf("stall of an unknown tool: %d, want 404", code)
	}
	if code, _ := r.post(t, "/api/fault/stall", url.Values{"tool": {"echo"}, "on": {"maybe"}}, nil); code != http.StatusBadRequest {
		t.Errorf("stall on=maybe: %d, want 400", code)
	}
	r.ask(t, "s2", "echo seven")
	snap := ev.until("the stalled call pending", func(s inspect.Snapshot) bool {
		return tool(s, "echo").Waiting == 1 && s.Session != nil && len(s.Session.Pending) == 1
	})
	p := snap.Session.Pending[0]
	if p.ID != "call_1" || p.Name != "echo" || p.Args != `{"x":7}` || !p.Running || p.Stream != "s2" {
		t.Fatalf("pending call %+v", p)
	}
	if !tool(snap, "echo").Stalled {
		t.Fatal("echo not shown stalled")
	}
	if code, body := r.post(t, "/api/fault/stall", url.Values{"tool": {"echo"}, "on": {"false"}}, nil); code != http.StatusOK {
		t.Fatalf("release: %d %s", code, body)
	}
	frames, err := r.conn.RecvStream(testCtx(t), "s2")
	if err != nil {
		t.Fatal(err)
	}
	if finalText(frames) != "done" {
		t.Fatalf("after the release: %v", frames)
	}
	ev.until("no pending call", func(s inspect.Snapshot) bool {
		return s.Session != nil && len(s.Session.Pending) == 0 && s.Session.Answer == "done" && !tool(s, "echo").Stalled
	})
}

func TestFaults_CutAModelStream(t *testing.T) {
	// A model that never answers: the stream stays open until cut.
	silent := actors.Spec{Name: "silent", New: func() actors.Logic { return actors.LogicFunc(func(actors.Context, any) {}) }}
	r := newRig(t, &inspect.Options{Faults: true}, silent)
	ev := r.events(t, "?session=s3")
	r.ask(t, "s3", "hello?")
	ev.until("the open stream", func(s inspect.Snapshot) bool {
		return s.Session != nil && len(s.Session.Streams) == 1 && s.Session.Streams[0].ID == "s3"
	})
	if code, _ := r.post(t, "/api/fault/cut", url.Values{"stream": {"nope"}}, nil); code != http.StatusNotFound {
		t.Errorf("cut of an unknown stream: %d, want 404", code)
	}
	if code, body := r.post(t, "/api/fault/cut", url.Values{"stream": {"s3"}}, nil); code != http.StatusOK {
		t.Fatalf("cut: %d %s", code, body)
	}
	frames, err := r.conn.RecvStream(testCtx(t), "s3")
	if err != nil {
		t.Fatal(err)
	}
	if len(frames) != 2 || frames[0].GetType() != messages.FrameType_ERROR || !strings.Contains(frames[0].GetText(), "cut by the inspector") {
		t.Fatalf("after the cut: %v", frames)
	}
	ev.until("the stream closed and the failure fed", func(s inspect.Snapshot) bool {
		for _, it := range s.Feed {
			if it.Kind == "model" && strings.Contains(it.Text, "s3") {
				return s.Session != nil && len(s.Session.Streams) == 0 && s.Session.Errors == 1
			}
		}
		return false
	})
}

func TestStore_DurabilityPosition(t *testing.T) {
	r := newRig(t, nil, actors.Spec{})
	store := r.in.Store(memstore.New(nil))
	defer store.Close()
	if err := store.PersistSnapshot(testCtx(t), "sess-9", 4, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := store.PersistEvents(testCtx(t), "sess-9", 4, [][]byte{[]byte("a"), []byte("b")}); err != nil {
		t.Fatal(err)
	}
	snap := r.state(t, "sess-9")
	if snap.Session == nil || snap.Session.Durability == nil || snap.Session.Durability.Index != 5 || snap.Session.Durability.Kind != "event" {
		t.Fatalf("session %+v", snap.Session)
	}
}

func TestAccess_LoopbackOnlyUnlessAllowed(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	for _, allow := range []bool{false, true} {
		in, err := inspect.New(rt, &inspect.Options{AllowRemote: allow, Faults: true})
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		for _, c := range []struct {
			remote, host string
			local        bool
		}{
			{"127.0.0.1:5000", "127.0.0.1:8080", true},
			{"[::1]:5000", "localhost:8080", true},
			{"192.0.2.7:5000", "127.0.0.1:8080", false},       // a client elsewhere
			{"127.0.0.1:5000", "inspector.example:80", false}, // DNS rebinding
		} {
			for _, path := range []string{"/", "/api/state", "/static/app.js"} {
				req := httptest.NewRequest(http.MethodGet, path, nil)
				req.RemoteAddr, req.Host = c.remote, c.host
				w := httptest.NewRecorder()
				in.ServeHTTP(w, req)
				wantOK := c.local || allow
				if got := w.Code == http.StatusOK; got != wantOK {
					t.Errorf("allow=%v %s from %s (Host %s): %d, want ok=%v", allow, path, c.remote, c.host, w.Code, wantOK)
				}
				if !wantOK && w.Code != http.StatusForbidden {
					t.Errorf("refused with %d, want 403", w.Code)
				}
			}
		}
	}
}

func TestListen_RefusesNonLoopbackUnlessAsked(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0", "[::]:0"} {
		ln, err := inspect.Listen(addr, nil)
		if !errors.Is(err, inspect.ErrNotLoopback) {
			if ln != nil {
				ln.Close()
			}
			t.Errorf("Listen(%q): %v, want ErrNotLoopback", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0"} {
		ln, err := inspect.Listen(addr, nil)
		if err != nil {
			t.Errorf("Listen(%q): %v", addr, err)
			continue
		}
		ln.Close()
	}
	ln, err := inspect.Listen("0.0.0.0:0", &inspect.ListenOptions{AllowRemote: true})
	if err != nil {
		t.Fatalf("Listen with AllowRemote: %v", err)
	}
	ln.Close()
	if _, err := inspect.Listen("nonsense", nil); err == nil {
		t.Error("Listen(nonsense) succeeded")
	}
}

// Listen checks a name by what it resolves to, and listens at the
// loopback IP it checked: a name all of whose addresses are loopback ones
// will do, and localhost will not when it resolves elsewhere.
func TestListen_ChecksWhatNamesResolveTo(t *testing.T) {
	loopback.FakeNames(t, map[string][]string{"loop.example": {"::1", "127.0.0.1"}, "localhost": {"192.168.1.20"}})
	ln, err := inspect.Listen("loop.example:0", nil)
	if err != nil {
		t.Fatalf("Listen(loop.example:0): %v", err)
	}
	defer ln.Close()
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.Equal(net.IPv4(127, 0, 0, 1)) {
		t.Errorf("listening at %s, want 127.0.0.1, the address checked", ln.Addr())
	}
	if ln, err := inspect.Listen("localhost:0", nil); !errors.Is(err, inspect.ErrNotLoopback) {
		if ln != nil {
			ln.Close()
		}
		t.Errorf("Listen(localhost:0), localhost resolving to 192.168.1.20: %v, want ErrNotLoopback", err)
	}
}

func TestNew_Validates(t *testing.T) {
	if _, err := inspect.New(nil, nil); err == nil {
		t.Error("New(nil) succeeded")
	}
	rt := actorstest.NewRuntime(t, nil)
	if _, err := inspect.New(rt, &inspect.Options{Interval: -1}); err == nil {
		t.Error("a negative interval was accepted")
	}
}

func TestSessions_OldestQuietOnesForgotten(t *testing.T) {
	r := newRig(t, &inspect.Options{MaxSessions: 2}, actors.Spec{})
	for _, s := range []string{"s1", "s2", "s3", "s4"} {
		if frames := r.converse(t, s, "echo"); finalText(frames) != "done" {
			t.Fatalf("%s: %v", s, frames)
		}
	}
	var ids []string
	for _, s := range r.state(t, "").Sessions {
		ids = append(ids, s.ID)
	}
	if strings.Join(ids, ",") != "s3,s4" {
		t.Fatalf("sessions %v, want the two newest", ids)
	}
}

func TestBreaker_ChangesInTheFeedAndFigures(t *testing.T) {
	r := newRig(t, nil, actors.Spec{})
	ev := r.events(t, "")
	r.in.OnBreakerChange("echo", tools.BreakerOpen)
	snap := ev.until("the open breaker", func(s inspect.Snapshot) bool { return tool(s, "echo").Breaker == "open" })
	if it := snap.Feed[0]; it.Kind != "breaker" || !it.Alert || !strings.Contains(it.Text, "echo open") {
		t.Fatalf("feed %+v", snap.Feed)
	}
	r.in.OnBreakerChange("echo", tools.BreakerHalfOpen)
	ev.until("the half-open breaker", func(s inspect.Snapshot) bool { return tool(s, "echo").Breaker == "half-open" })
	if _, page := r.get(t, "/"); !strings.Contains(page, `data-breaker="half-open"`) {
		t.Fatal("the page does not show the breaker's state")
	}
}

func TestTree_ALoopUnderAStageIsAnAgentLoop(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	in, err := inspect.New(rt, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	silent := actors.Spec{Name: "model", New: func() actors.Logic { return actors.LogicFunc(func(actors.Context, any) {}) }}
	loop, err := tools.NewLoop(in.Model(silent), &tools.LoopOptions{RouterOptions: tools.RouterOptions{Name: "delegated"}})
	if err != nil {
		t.Fatal(err)
	}
	// As a delegation's loop runs under the calling tool's actor.
	outer := actors.Wrap("caller", loop, func() actors.Wrapped { return actors.Hooks{} })
	conn, err := rt.Start(outer)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(testCtx(t))
	// Wait until the three actors are up (the inner ones start with the
	// outer's first turn).
	started := make(chan struct{}, 8)
	defer rt.WatchActors(func(actors.ActorEvent) {
		select {
		case started <- struct{}{}:
		default:
		}
	})()
	for len(rt.Actors()) < 3 {
		<-started
	}
	roles := map[string]string{}
	for _, n := range in.Snapshot("").Tree {
		roles[n.Name] = n.Role
	}
	if roles["caller"] != "agent" || roles["delegated"] != "agent loop" || roles["model"] != "model adapter" {
		t.Fatalf("roles %v", roles)
	}
}

// crashRig is a runtime with an inspector and a "lead" duplex whose
// child, "tool-boom", fails with boom on the frame the lead sends it
// when it gets one; the lead's turn then waits for release, so that
// the child's failure waits for its supervisor's decision meanwhile.
type crashRig struct {
	rt      *actors.Runtime
	in      *inspect.Inspector
	lead    actors.Ref
	child   chan actors.Ref
	failing chan struct{}
	release func()
	stopped chan actors.ActorEvent // the child's stop, once the inspector saw it
}

func newCrashRig(t *testing.T, opts *actors.RuntimeOptions, boom error) *crashRig {
	t.Helper()
	rt, in := inspected(t, opts, nil)
	r := &crashRig{rt: rt, in: in, child: make(chan actors.Ref, 1), failing: make(chan struct{}),
		stopped: make(chan actors.ActorEvent, 1)}
	released := make(chan struct{})
	r.release = sync.OnceFunc(func() { close(released) })
	t.Cleanup(r.release) // before the runtime closes: the lead's turn ends
	child := actors.Spec{Name: "tool-boom", New: func() actors.Logic {
		return actors.LogicFunc(func(c actors.Context, msg any) {
			if f, ok := msg.(*messages.Frame); ok && f.GetType() == messages.FrameType_TEXT {
				close(r.failing)
				c.Fail(boom)
			}
		})
	}}
	lead := actors.Spec{Name: "lead", New: func() actors.Logic {
		var ref actors.Ref
		return actors.LogicFunc(func(c actors.Context, msg any) {
			switch msg.(type) {
			case actors.Started:
				var err error
				if ref, err = c.Spawn(child); err != nil {
					panic(err)
				}
				r.child <- ref
			case *messages.Frame:
				c.Send(ref, messages.Text("f", "fail"))
				<-released
			}
		})
	}}
	// Watched after the inspector: it has seen an event by the time
	// this watcher is called with it.
	var childID string
	var mu sync.Mutex
	t.Cleanup(rt.WatchActors(func(ev actors.ActorEvent) {
		mu.Lock()
		defer mu.Unlock()
		if ev.Actor.State == actors.ActorStopped && ev.Actor.ID == childID {
			r.stopped <- ev
		}
	}))
	var err error
	if r.lead, err = rt.Spawn(lead); err != nil {
		t.Fatal(err)
	}
	ref := <-r.child
	mu.Lock()
	childID = ref.String()
	mu.Unlock()
	r.child <- ref
	return r
}

// failChild has the lead send its child the frame it fails on, and
// returns the child once it failed (its failure waiting for the lead's
// decision until release).
func (r *crashRig) failChild(ctx context.Context, t *testing.T) actors.Ref {
	t.Helper()
	child := <-r.child
	r.rt.Send(r.lead, messages.Text("s", "go"))
	select {
	case <-r.failing:
	case <-ctx.Done():
		t.Fatal("the child never failed")
	}
	return child
}

// snapshot is what GET /api/state answers.
func (r *crashRig) snapshot(t *testing.T) inspect.Snapshot {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/api/state", nil)
	req.RemoteAddr = "127.0.0.1:1234"
	rec := httptest.NewRecorder()
	r.in.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /api/state: %d %s", rec.Code, rec.Body)
	}
	var snap inspect.Snapshot
	if err := json.Unmarshal(rec.Body.Bytes(), &snap); err != nil {
		t.Fatal(err)
	}
	return snap
}

// failureItems returns the feed's items about actor that tell its
// failure reason.
func failureItems(snap inspect.Snapshot, actor, reason string) []inspect.FeedItem {
	var out []inspect.FeedItem
	for _, it := range snap.Feed {
		if it.Actor == actor && strings.Contains(it.Text, reason) {
			out = append(out, it)
		}
	}
	return out
}

// TestFeed_StopBeforeDecisionShowsTheFailure: an actor that failed and
// was stopped (a system stop, as a stopping parent sends its children)
// before its supervisor decided about the failure is reported stopped
// with the failure, and no decision follows (a restart finds nothing to
// restart and is told to no one): the tree keeps the crash, and the
// feed says the actor stopped failed, with the reason, as an alert.
func TestFeed_StopBeforeDecisionShowsTheFailure(t *testing.T) {
	boom := errors.New("boom went off")
	r := newCrashRig(t, nil, boom)
	ctx := testCtx(t)
	child := r.failChild(ctx, t)
	r.rt.System().Root.Stop(child.PID()) // taken while the child waits for the lead's decision
	var ev actors.ActorEvent
	select {
	case ev = <-r.stopped:
	case <-ctx.Done():
		t.Fatal("the child was never reported stopped")
	}
	if !errors.Is(ev.Actor.LastFailure, boom) {
		t.Fatalf("the child's stop was reported with last failure %v, want %v", ev.Actor.LastFailure, boom)
	}
	snap := r.snapshot(t)
	r.release()
	var node *inspect.Node
	for i := range snap.Tree {
		if snap.Tree[i].ID == child.String() {
			node = &snap.Tree[i]
		}
	}
	if node == nil || node.Ended == nil || node.LastFailure != boom.Error() {
		t.Errorf("tree node of the crashed child %+v: want it kept, ended, with its failure", node)
	}
	items := failureItems(snap, child.String(), boom.Error())
	if len(items) != 1 || !items[0].Alert {
		t.Fatalf("feed items telling the child's failure %+v, want one alert; the feed: %+v", items, snap.Feed)
	}
}

// TestFeed_StopByDecisionShowsTheFailureOnce: an actor stopped by its
// supervisor's decision about its failure is in the feed by that
// decision; its stop, which reports the same failure, adds no second
// item.
func TestFeed_StopByDecisionShowsTheFailureOnce(t *testing.T) {
	boom := errors.New("boom went off")
	r := newCrashRig(t, &actors.RuntimeOptions{Supervision: supervisor.MustNew(&supervisor.Options{MaxRestarts: supervisor.NoRestarts})}, boom)
	ctx := testCtx(t)
	child := r.failChild(ctx, t)
	r.release() // the lead decides: stop
	select {
	case <-r.stopped:
	case <-ctx.Done():
		t.Fatal("the child was never reported stopped")
	}
	snap := r.snapshot(t)
	items := failureItems(snap, child.String(), boom.Error())
	if len(items) != 1 || items[0].Kind != "supervision" {
		t.Fatalf("feed items telling the child's failure %+v, want the decision's alone; the feed: %+v", items, snap.Feed)
	}
}
