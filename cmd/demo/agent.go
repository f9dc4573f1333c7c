package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/anthropic"
	"github.com/polyweave/polyweave-go/models/openai"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/supervisor"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/workspace"
)

// defaultScript is what the scripted model says (see models/scripted for
// the format).
//
//go:embed script.json
var defaultScript []byte

const (
	systemPrompt = "You are a careful coding agent working in a sandboxed workspace folder. " +
		"Use the tools: write_file to create files, run_command to run shell commands in the workspace, " +
		"read_file to read files or list folders. When the task is done, answer briefly without calling tools."
	// maxAttempts bounds how many times a conversation is asked for, the
	// first time included, when answers fail.
	maxAttempts = 3
	// closeGrace bounds how long stopping the actors may take at the end.
	closeGrace = 10 * time.Second
)

// errTimeout is the cause of the run's context when -timeout passes.
var errTimeout = errors.New("timeout")

// runAgent sets up the workspace, the model, the tool loop and the actor
// runtime, runs the conversation and prints its summary.
func runAgent(ctx context.Context, cfg config, stdout, stderr io.Writer) (err error) {
	start := time.Now()
	ctx, cancel := context.WithTimeoutCause(ctx, cfg.timeout, errTimeout)
	defer cancel()
	tr := newTranscript(stdout, nil, start)
	if cfg.json {
		tr = newTranscript(stderr, stdout, start)
	}
	var sess *session
	if cfg.store != "" {
		if sess, err = openSession(ctx, cfg); err != nil {
			return err
		}
		// Deferred before the runtime's Close, so it runs after it.
		defer func() {
			if cerr := sess.close(); cerr != nil && err == nil {
				err = fmt.Errorf("close -store: %w", cerr)
			}
		}()
	}

	dir, where := cfg.workspace, "kept"
	switch {
	case dir == "" && sess != nil:
		if dir, err = sess.workspaceDir(); err != nil {
			return err
		}
		where = "kept with the session"
	case dir == "":
		if dir, err = os.MkdirTemp("", "polyweave-demo-"); err != nil {
			return fmt.Errorf("make workspace: %w", err)
		}
		where = "temporary"
		defer os.RemoveAll(dir)
	}
	ws, err := workspace.New(dir, &workspace.Options{CommandTimeout: min(workspace.DefaultCommandTimeout, cfg.timeout)})
	if err != nil {
		return err
	}
	defer ws.Close()
	tr.Note("sandbox", "%s", ws.Protections())
	mcpTools, closeMCP, err := importMCP(ctx, cfg.mcp, ws, tr) // -mcp (mcp.go)
	if err != nil {
		return err
	}
	defer closeMCP() // after the agent's runtime has stopped

	var in *injector
	if cfg.crash.site != crashNone {
		in = &injector{at: cfg.crash, notify: tr.Fault}
	}
	model, about, closeModel, err := newModel(cfg, tr)
	if err != nil {
		return err
	}
	defer closeModel()
	loop, err := newLoop(cfg, ws, in.wrapModel(model), in, sess, mcpTools...)
	if err != nil {
		return err
	}

	var restarts atomic.Int64
	rt, err := actors.NewRuntime(&actors.RuntimeOptions{OnSupervision: func(ev supervisor.Event) {
		if ev.Directive == supervisor.Restart {
			restarts.Add(1)
		}
		tr.Supervision(ev)
	}})
	if err != nil {
		return fmt.Errorf("start actors: %w", err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeGrace)
		defer cancel()
		if cerr := rt.Close(closeCtx); cerr != nil && err == nil {
			err = fmt.Errorf("stop actors: %w", cerr)
		}
	}()
	conn, err := rt.Start(loop)
	if err != nil {
		return fmt.Errorf("start the tool loop: %w", err)
	}

	tr.Note("demo", "%s, workspace %s (%s)", about, ws.Dir(), where)
	if in != nil {
		tr.Note("demo", "will inject a panic at -crash %s", cfg.crash.String())
	}
	a := &agent{conn: conn, tr: tr, timeout: cfg.timeout,
		restartLoop: func() (*actors.Conn, error) { return rt.Start(loop) }}
	first := models.EncodeMessages([]models.Message{models.UserMessage(cfg.prompt)})
	if sess != nil {
		tr.Note("session", "%s", sess.describe())
		first, a.durable = sess.first, true
	}
	tr.Note("user", "%s", firstPrompt(first))
	err = a.run(ctx, first)
	if err == nil && in != nil && !in.Fired() {
		tr.Note("demo", "the -crash point %s was never reached", cfg.crash.String())
	}
	outcome := "ok"
	if err != nil {
		outcome = "failed"
	}
	tr.Note("summary", "%s · %s · %s (%d failed) · %s · %s", outcome, plural(a.iterations, "iteration"),
		plural(a.calls, "tool call"), a.failed, plural(int(restarts.Load()), "restart"), shortDuration(time.Since(start)))
	if sess != nil {
		tr.Note("session", "to resume or replay it: %s", sess.resumeHint())
	}
	if err == nil {
		err = tr.Err()
	}
	return err
}

// newModel makes the model adapter the flags ask for, a description of it
// for the transcript and a function releasing it.
func newModel(cfg config, tr *transcript) (actors.Spec, string, func(), error) {
	if cfg.provider == "anthropic" {
		return newAnthropicModel(cfg, tr)
	}
	if cfg.baseURL == "" {
		script, err := loadScript()
		if err != nil {
			return actors.Spec{}, "", nil, err
		}
		m, err := scripted.New(withRetryTurn(script, cfg.crash), nil)
		if err != nil {
			return actors.Spec{}, "", nil, fmt.Errorf("embedded script: %w", err)
		}
		return m.Spec("model"), "scripted model (embedded script)", func() {}, nil
	}
	key, err := openai.APIKeyFromEnv(cfg.apiKeyEnv)
	switch {
	case err != nil && cfg.apiKeyEnvSet:
		return actors.Spec{}, "", nil, fmt.Errorf("-api-key-env: %w", err)
	case err != nil:
		tr.Note("demo", "$%s is not set: sending no API key (fine for local servers)", cfg.apiKeyEnv)
	}
	m, err := openai.New(&openai.Options{BaseURL: cfg.baseURL, APIKey: key, Model: cfg.model, Timeout: cfg.timeout})
	if err != nil {
		return actors.Spec{}, "", nil, err
	}
	return m.Spec("model"), fmt.Sprintf("model %s at %s", cfg.model, cfg.baseURL), m.Close, nil
}

// newAnthropicModel makes an adapter for the Anthropic Messages API.
func newAnthropicModel(cfg config, tr *transcript) (actors.Spec, string, func(), error) {
	key, err := anthropic.APIKeyFromEnv(cfg.apiKeyEnv)
	switch {
	case err != nil && cfg.apiKeyEnvSet:
		return actors.Spec{}, "", nil, fmt.Errorf("-api-key-env: %w", err)
	case err != nil:
		tr.Note("demo", "$%s is not set: sending no API key", cfg.apiKeyEnv)
	}
	baseURL := cfg.baseURL
	if baseURL == "" {
		baseURL = anthropic.DefaultBaseURL
	}
	m, err := anthropic.New(&anthropic.Options{BaseURL: baseURL, APIKey: key, Model: cfg.model, Timeout: cfg.timeout})
	if err != nil {
		return actors.Spec{}, "", nil, err
	}
	return m.Spec("model"), fmt.Sprintf("model %s at %s (Anthropic)", cfg.model, baseURL), m.Close, nil
}

// loadScript parses the embedded script, with the arguments of its calls
// made compact, as models send them.
func loadScript() (scripted.Script, error) {
	script, err := scripted.Parse(defaultScript)
	if err != nil {
		return script, fmt.Errorf("embedded script: %w", err)
	}
	for _, turn := range script.Turns {
		for i, call := range turn.ToolCalls {
			var b bytes.Buffer
			if err := json.Compact(&b, []byte(call.Arguments)); err != nil {
				return script, fmt.Errorf("embedded script: call %s: %w", call.ID, err)
			}
			turn.ToolCalls[i].Arguments = b.String()
		}
	}
	return script, nil
}

// newLoop binds the workspace tools and more (-mcp's) and wraps model in
// a tool loop.
func newLoop(cfg config, ws *workspace.Workspace, model actors.Spec, in *injector, sess *session, more ...*tools.Tool) (actors.Spec, error) {
	toolset, err := workspace.Tools(ws)
	if err != nil {
		return actors.Spec{}, fmt.Errorf("workspace tools: %w", err)
	}
	toolset = append(toolset, more...)
	if toolset, err = in.wrapTools(toolset); err != nil {
		return actors.Spec{}, err
	}
	opts := &tools.LoopOptions{
		RouterOptions: tools.RouterOptions{Name: "agent", Tools: toolset},
		SystemPrompt:  systemPrompt,
		MaxIterations: cfg.maxIterations,
	}
	if sess != nil {
		opts.Session = sess.options()
	}
	if cfg.crash.site == crashLoop {
		opts.OnToolResult = in.onToolResult
	}
	loop, err := tools.NewLoop(model, opts)
	if err != nil {
		return actors.Spec{}, fmt.Errorf("tool loop: %w", err)
	}
	return loop, nil
}

// agent drives one conversation through the tool loop and counts what
// happens. It is used by one goroutine.
type agent struct {
	conn    *actors.Conn
	tr      *transcript
	timeout time.Duration // the -timeout the run's context carries
	durable bool          // the loop persists the session (-store)
	// restartLoop starts the tool loop afresh (it then loads the stored
	// session), for a durable run whose answer failed.
	restartLoop func() (*actors.Conn, error)

	iterations int // model answers seen
	calls      int // tool calls seen
	failed     int // error results seen
}

// run sends the first request (the "messages" payload first) and follows
// the answer. When the answer fails (a stage crashed and was restarted by
// its supervisor, or the model's stream broke), run asks again on a new
// stream, maxAttempts times in all. A durable loop resumes its stored
// session when it gets the first request again. A loop without a session
// knows nothing of the conversation after a restart: run sends the
// conversation so far, the first request's messages and every tool round
// whose calls ran, as the loop would have sent it.
func (a *agent) run(ctx context.Context, first json.RawMessage) error {
	var history []json.RawMessage
	if err := json.Unmarshal(first, &history); err != nil {
		return fmt.Errorf("first request: %w", err)
	}
	list := first
	for attempt := 1; ; attempt++ {
		stream := "demo"
		if attempt > 1 {
			stream = fmt.Sprintf("demo-%d", attempt)
		}
		if err := a.conn.SendAll(messages.RawParam(stream, models.ParamMessages, list), messages.End(stream)); err != nil {
			return fmt.Errorf("send the request: %w", err)
		}
		res, err := a.follow(ctx, stream)
		if err != nil {
			_ = a.conn.Send(messages.Abort(stream))
			if errors.Is(context.Cause(ctx), errTimeout) {
				return fmt.Errorf("no final answer within -timeout %v", a.timeout)
			}
			if ctx.Err() != nil {
				return errors.New("interrupted")
			}
			if errors.Is(err, actors.ErrDuplexStopped) {
				return fmt.Errorf("the tool loop stopped for good (its supervisor gave up restarting it): %w", err)
			}
			return err
		}
		history = append(history, res.rounds...)
		switch {
		case res.failure == "" && res.answered:
			return nil
		case res.failure == "":
			return errors.New("no final answer: the model still called tools after -max-iterations rounds")
		case attempt < maxAttempts && a.durable:
			// A loop that did not restart itself (the model failed, say)
			// holds the session in memory as it began; a fresh one loads
			// it from the store, as a new process would.
			a.tr.Note("resume", "the answer failed: starting the tool loop again from the store and sending the first request again on stream demo-%d",
				attempt+1)
			if err := a.conn.Close(ctx); err != nil {
				return fmt.Errorf("stop the tool loop: %w", err)
			}
			conn, err := a.restartLoop()
			if err != nil {
				return fmt.Errorf("start the tool loop again: %w", err)
			}
			a.conn = conn
		case attempt < maxAttempts:
			list = models.JoinMessages(history)
			a.tr.Note("resume", "the answer failed: sending the conversation so far (%s) again on stream demo-%d%s",
				plural(len(history), "message"), attempt+1, dropped(res))
		default:
			return fmt.Errorf("the agent failed: %s", res.failure)
		}
	}
}

// answer is what one stream of the loop said.
type answer struct {
	rounds   []json.RawMessage // assistant and tool messages of the complete tool rounds
	answered bool              // the model's last answer made no tool calls
	failure  string            // the ERROR text, if the stream failed
	// unfinishedText: the failed stream's last response had text that
	// no completed round kept.
	unfinishedText bool
}

// round is one model answer with tool calls, as the loop surfaced it.
type round struct {
	text    strings.Builder
	calls   []*messages.Frame
	results map[string]*messages.Frame
}

func (r *round) complete() bool { return len(r.calls) > 0 && len(r.results) == len(r.calls) }

// ran reports whether every call of the round ran: none was answered
// "stopped" because the loop or the model failed first.
func (r *round) ran() bool {
	for _, res := range r.results {
		if tools.KindOf(res) == tools.FailureStopped {
			return false
		}
	}
	return true
}

// follow prints the frames of stream until its END and collects them.
func (a *agent) follow(ctx context.Context, stream string) (answer, error) {
	var res answer
	cur := &round{results: map[string]*messages.Frame{}}
	first := true
	commit := func() {
		if cur.complete() {
			res.rounds = append(res.rounds, roundMessages(cur)...)
			a.iterations++
		}
		cur = &round{results: map[string]*messages.Frame{}}
	}
	for {
		f, err := a.conn.Recv(ctx)
		if err != nil {
			return res, fmt.Errorf("read the answer: %w", err)
		}
		if f.GetStreamId() != stream {
			continue // a late frame of an earlier attempt
		}
		if first {
			// What happened before this stream began (a restart after a
			// failed attempt, say) is told before its frames.
			first = false
			a.tr.Flush()
		}
		a.tr.Frame(f)
		switch f.GetType() {
		case messages.FrameType_TEXT:
			if cur.complete() {
				commit()
			}
			cur.text.WriteString(f.GetText())
		case messages.FrameType_TOOL_CALL:
			if cur.complete() {
				commit()
			}
			cur.calls = append(cur.calls, f)
			a.calls++
		case messages.FrameType_TOOL_RESULT:
			cur.results[f.GetToolCallId()] = f
			if f.IsErrorResult() {
				a.failed++
			}
		case messages.FrameType_ERROR:
			res.failure = f.GetText()
		case messages.FrameType_END:
			if len(cur.calls) == 0 && res.failure == "" {
				res.answered = true
				a.iterations++
			}
			res.unfinishedText = res.failure != "" && cur.text.Len() > 0 && !cur.complete()
			if res.failure == "" || cur.ran() {
				commit()
			} // else the round's calls were stopped before they ran: ask again from before it
			return res, nil
		}
	}
}

// roundMessages is a round as the loop itself sends it to the model: the
// assistant message with its tool calls, then one tool message per call,
// in call order.
func roundMessages(r *round) []json.RawMessage {
	calls := make([]models.ToolCall, len(r.calls))
	for i, c := range r.calls {
		calls[i] = models.ToolCall{Index: i, ID: c.GetToolCallId(), Name: c.GetName(), Arguments: c.GetPayload()}
	}
	out := []json.RawMessage{models.AssistantMessage(r.text.String(), calls...).AppendJSON(nil)}
	for _, c := range r.calls {
		out = append(out, models.ToolMessage(c.GetToolCallId(), r.results[c.GetToolCallId()].GetPayload()).AppendJSON(nil))
	}
	return out
}

// dropped says, after a failed attempt whose unfinished response had
// already said something, that it is not part of the conversation: the
// model is asked again and may say it again.
func dropped(res answer) string {
	if !res.unfinishedText {
		return ""
	}
	return " (the unfinished answer above is dropped: the model answers again)"
}

// plural is n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
