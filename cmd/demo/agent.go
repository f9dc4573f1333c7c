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
	"sync"
	"sync/atomic"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability"
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

// systemPromptFor is the prompt of the agents that work in the
// workspace, saying what is true of this run: whether run_command runs
// commands in a sandbox (prot, the workspace's protections), and that
// the tools of the -mcp servers (mcp) are not sandboxed: they run in
// the servers' processes, with this program's rights.
func systemPromptFor(prot workspace.Protections, mcp []*tools.Tool) string {
	p := "You are a careful coding agent working in a workspace folder. " +
		"Use the tools: write_file to create files, run_command to run shell commands in the workspace, " +
		"read_file to read files or list folders. "
	if prot.Sandbox {
		p += "run_command runs commands in a sandbox (its description says what they may do). "
	} else {
		p += "run_command runs commands without a sandbox, with this program's rights: run only what the task needs. "
	}
	if len(mcp) > 0 {
		names := make([]string, len(mcp))
		for i, t := range mcp {
			names[i] = t.Name()
		}
		p += "The tools " + strings.Join(names, ", ") + " come from other programs (MCP servers) and are not sandboxed: " +
			"they act with this program's rights, outside the workspace too. "
	}
	return p + "When the task is done, answer briefly without calling tools."
}

const (
	// maxAttempts bounds how many times a conversation is asked for, the
	// first time included, when answers fail.
	maxAttempts = 3
	// closeGrace bounds how long stopping the actors may take at the end.
	closeGrace = 10 * time.Second
)

// errTimeout is the cause of the run's context when -timeout passes.
var errTimeout = errors.New("timeout")

// timedOut is the failure of a run that -timeout stopped.
func timedOut(cfg config) error {
	return fmt.Errorf("no final answer within -timeout %v", cfg.timeout)
}

// timedOutInSetup is err, the failure of a step that sets the run up,
// unless -timeout passed and ended that step (err is then the deadline's,
// from deep down a store or a connection): the run fails then as when it
// passes later, with what the step was doing after it.
func timedOutInSetup(ctx context.Context, cfg config, err error) error {
	if !errors.Is(context.Cause(ctx), errTimeout) || !(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errTimeout)) {
		return err
	}
	return fmt.Errorf("%w (it passed while the run was being set up: %w)", timedOut(cfg), err)
}

// runAgent sets up the workspace, the model, the agent and the actor
// runtime, runs the conversation (or, with -team, the lead agent's) and
// prints its summary.
func runAgent(ctx context.Context, cfg config, stdout, stderr io.Writer) (err error) {
	start, interrupted := time.Now(), ctx // -ui lingers until interrupted
	ctx, cancel := context.WithTimeoutCause(ctx, cfg.timeout, errTimeout)
	defer cancel()
	tr := newTranscript(stdout, nil, start)
	if cfg.json {
		tr = newTranscript(stderr, stdout, start)
	}
	var sess *session
	if cfg.store != "" {
		if sess, err = openSession(ctx, cfg); err != nil {
			return timedOutInSetup(ctx, cfg, err)
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
		if errors.Is(err, workspace.ErrSystemRoot) { // the library names its option, not a flag
			return &usageError{err: fmt.Errorf("-workspace %s is a system directory: make a folder inside it and give that", dir)}
		}
		return err
	}
	defer ws.Close()
	tr.Note("sandbox", "%s", ws.Protections())
	mcpTools, closeMCP, err := importMCP(ctx, cfg.mcp, ws, tr) // -mcp (mcp.go)
	if err != nil {
		return timedOutInSetup(ctx, cfg, err)
	}
	defer closeMCP() // after the agent's runtime has stopped

	var in *injector
	if cfg.crash.site != crashNone {
		in = &injector{at: cfg.crash, notify: tr.Fault}
	}
	trc, err := startTracing(cfg.trace)
	if err != nil {
		return err
	}
	defer func() { // after the runtime's Close: every span has ended
		if cerr := trc.close(context.WithoutCancel(ctx)); cerr != nil && err == nil {
			err = cerr
		}
	}()
	var restarts atomic.Int64
	rt, err := actors.NewRuntime(&actors.RuntimeOptions{OnSupervision: func(ev supervisor.Event) {
		if ev.Directive == supervisor.Restart {
			restarts.Add(1)
		}
		tr.Supervision(ev)
		trc.supervision(ev)
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

	ui, err := startUI(cfg, rt, tr)
	if err != nil {
		return err
	}
	defer ui.close()
	ui.restore(sess)
	d := &driver{cfg: cfg, tr: tr, rt: rt, ws: ws, in: in, sess: sess, ui: ui, mcp: mcpTools, trace: trc}
	defer d.close(ctx)
	var lead *agent.Agent
	var about string
	if cfg.team {
		lead, about, err = d.team()
	} else {
		lead, about, err = d.solo()
	}
	if err != nil {
		return err
	}

	tr.Note("demo", "%s, workspace %s (%s)", about, ws.Dir(), where)
	if in != nil {
		where := ""
		if cfg.team {
			where = " (in the writer agent)"
		}
		tr.Note("demo", "will inject a panic at -crash %s%s", cfg.crash.String(), where)
	}
	id, msgs := "demo", []models.Message{models.UserMessage(cfg.prompt)}
	if sess != nil {
		tr.Note("session", "%s", sess.describe())
		if msgs, err = models.DecodeMessages(sess.first); err != nil {
			return fmt.Errorf("session %q: its first request: %w", sess.id, err)
		}
		id = sess.id
	}
	tr.Note("user", "%s", firstPrompt(models.EncodeMessages(msgs)))
	ans, err := d.follow(ctx, lead, id, msgs)
	if uerr := d.undo(ctx, id); uerr != nil && err == nil {
		err = uerr
	}
	if err == nil && in != nil && !in.Fired() {
		tr.Note("demo", "the -crash point %s was never reached", cfg.crash.String())
	}
	tally := d.tally(ans)
	tr.Note("summary", "%s · %s · %s (%d failed) · %s · %s", tally.outcome(err), plural(tally.iterations, "iteration"),
		plural(tally.calls, "tool call"), tally.failed, plural(int(restarts.Load()), "restart"), shortDuration(time.Since(start)))
	if sess != nil {
		switch stored, perr := sess.persisted(ctx); {
		case perr != nil:
			tr.Note("session", "cannot tell what the store holds of session %s: %v%s", sess.id, perr, damageHint(sess.path, perr))
		case stored:
			tr.Note("session", "to resume or replay it: %s", sess.resumeHint(cfg))
		default:
			tr.Note("session", "nothing of session %s was stored (the run stopped before the tool loop's first step): run it again to start it anew", sess.id)
		}
	}
	ui.linger(interrupted)
	if err == nil {
		err = tr.Err()
	}
	return err
}

// newModel makes the model adapter the flags ask for, a description of it
// for the transcript and a function releasing it.
// Without -base-url the model is scripted with script (see loadScript),
// given the retry turn -crash tool needs when crash is that site.
func newModel(cfg config, tr *transcript, script []byte, crash crashPoint) (actors.Spec, string, func(), error) {
	if cfg.provider == "anthropic" {
		return newAnthropicModel(cfg, tr)
	}
	if cfg.baseURL == "" {
		s, err := loadScript(script)
		if err != nil {
			return actors.Spec{}, "", nil, err
		}
		m, err := scripted.New(withRetryTurn(s, crash), nil)
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

// loadScript parses an embedded script, with the arguments of its calls
// made compact, as models send them.
func loadScript(raw []byte) (scripted.Script, error) {
	script, err := scripted.Parse(raw)
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

// driver builds the demo's agents and follows their conversations into
// the transcript.
type driver struct {
	cfg     config
	tr      *transcript
	rt      *actors.Runtime
	ws      *workspace.Workspace
	in      *injector
	sess    *session
	ui      *liveView // -ui, or nil
	trace   *tracing  // -trace, or nil
	agents  []*agent.Agent
	closes  []func()
	mcp     []*tools.Tool      // the -mcp servers' tools, the workspace agent's too
	journal *workspace.Journal // -undo

	mu   sync.Mutex
	subs []*models.Answer // the answers of the delegations (-team)
}

// close stops the agents and releases the models.
func (d *driver) close(ctx context.Context) {
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeGrace)
	defer cancel()
	for _, a := range d.agents {
		_ = a.Close(closeCtx) // the runtime's Close reports what does not stop
	}
	for _, c := range d.closes {
		c()
	}
}

// solo builds the one agent of a plain run: the workspace tools, the
// model the flags ask for, the -crash injection and the -store session.
func (d *driver) solo() (*agent.Agent, string, error) {
	model, about, closeModel, err := newModel(d.cfg, d.tr, defaultScript, d.cfg.crash)
	if err != nil {
		return nil, "", err
	}
	d.closes = append(d.closes, closeModel)
	toolset, err := workspace.Tools(d.ws)
	if err != nil {
		return nil, "", fmt.Errorf("workspace tools: %w", err)
	}
	if toolset, err = d.in.wrapTools(append(toolset, d.mcp...)); err != nil {
		return nil, "", err
	}
	opts := &agent.Options{Name: agentName, Tools: toolset, SystemPrompt: systemPromptFor(d.ws.Protections(), d.mcp)}
	if err := d.applyApproval(opts); err != nil {
		return nil, "", err
	}
	d.crashable(opts)
	a, err := d.newAgent(d.in.wrapModel(model), opts)
	return a, about, err
}

// crashable adds what -crash and the session flags ask of the agent that
// may crash (the only one, or the writer of a team).
func (d *driver) crashable(opts *agent.Options) {
	opts.MaxIterations, opts.MaxAttempts = d.cfg.maxIterations, maxAttempts
	if d.cfg.crash.site == crashLoop {
		opts.OnToolResult = d.in.onToolResult
	}
	if d.sess != nil && !d.cfg.team {
		opts.Store = d.sess.store
	}
}

func (d *driver) newAgent(model actors.Spec, opts *agent.Options) (*agent.Agent, error) {
	model = d.trace.agent(model, providerName(d.cfg), opts)
	model, err := d.ui.agent(model, opts)
	if err != nil {
		return nil, err
	}
	a, err := agent.New(d.rt, model, opts)
	if err != nil {
		return nil, fmt.Errorf("start the %s: %w", opts.Name, err)
	}
	d.agents = append(d.agents, a)
	return a, nil
}

// follow runs the conversation msgs of session id on a and prints its
// events. It returns the answer, or what was answered with an error
// saying why the agent did not finish.
func (d *driver) follow(ctx context.Context, a *agent.Agent, id string, msgs []models.Message) (*models.Answer, error) {
	v := view{}
	if d.cfg.team {
		v.name = a.Name()
	}
	unfinished := false // text was said since the last tool result
	for ev, err := range d.stream(ctx, a, id, msgs) {
		if err != nil {
			return ev.Answer, d.failure(ctx, err)
		}
		switch ev.Kind {
		case agent.EventDone:
			d.tr.EndText()
			return ev.Answer, nil
		case agent.EventRestart:
			d.tr.Note("resume", "%s", d.resumeLine(ev, id, len(msgs), unfinished, d.sess != nil))
			unfinished = false
			continue
		case agent.EventText:
			unfinished = true
		case agent.EventToolResult:
			unfinished = false
		}
		d.tr.Event(v, ev)
	}
	return nil, errors.New("the agent's events ended without an answer")
}

// resumeLine tells how the agent asks again after a failed attempt.
func (d *driver) resumeLine(ev agent.Event, id string, first int, unfinished, durable bool) string {
	stream := agent.StreamID(id, ev.Attempt)
	line := "the answer failed: resuming the session from the store on stream " + stream
	if !durable {
		line = fmt.Sprintf("the answer failed: sending the conversation so far (%s) again on stream %s",
			plural(first+len(ev.Answer.Messages()), "message"), stream)
	}
	if unfinished {
		// What the unfinished response said is not part of the
		// conversation: the model is asked again and may say it again.
		line += " (the unfinished answer above is dropped: the model answers again)"
	}
	return line
}

// failure says why the conversation did not finish. It puts err down to
// -timeout or the interrupt only when err is the run's ctx ending: the
// ctx may also end just after the agent failed for a reason of its own,
// which is then the one given.
func (d *driver) failure(ctx context.Context, err error) error {
	var failed *agent.FailedError
	cut := ctx.Err() != nil && (errors.Is(err, context.Cause(ctx)) || errors.Is(err, ctx.Err()))
	switch {
	case cut && errors.Is(context.Cause(ctx), errTimeout):
		d.tr.CutCalls(fmt.Sprintf("cut by -timeout %v (it may have done part or all of its work)", d.cfg.timeout))
		return timedOut(d.cfg)
	case cut:
		d.tr.CutCalls("cut by the interrupt (it may have done part or all of its work)")
		return errors.New("interrupted")
	case errors.As(err, &failed):
		if failed.Reason == stoppedForGood {
			return fmt.Errorf("the tool loop stopped for good (its supervisor gave up restarting it): %w", err)
		}
		if errors.Is(err, agent.ErrLoopRestarting) {
			return fmt.Errorf("the agent failed: the tool loop kept restarting for other actors' failures (%d attempts not counted; the last: %s)", failed.Uncounted, failed.Reason)
		}
		// The reason says it all; the cause stays for errors.Is (a store
		// found damaged gets its hint: withDamageHint).
		return &quietCause{msg: fmt.Sprintf("the agent failed: %s%s", failed.Reason, baseURLHint(d.cfg, failed.Reason)), cause: err}
	case errors.Is(err, agent.ErrNoAnswer):
		return errors.New("no final answer: the model still called tools after -max-iterations rounds")
	case errors.Is(err, actors.ErrDuplexStopped):
		return fmt.Errorf("the tool loop stopped for good (its supervisor gave up restarting it): %w", err)
	}
	return err
}

// quietCause is an error that says msg and wraps cause without saying it
// again.
type quietCause struct {
	msg   string
	cause error
}

func (e *quietCause) Error() string { return e.msg }
func (e *quietCause) Unwrap() error { return e.cause }

// baseURLHint explains the usual cause of an OpenAI-compatible server
// answering 404 to a -base-url that does not end in /v1: the API root was
// given without it, and the demo posted to <root>/chat/completions. With
// /v1 a 404 means something else (Ollama's answer for an unknown model),
// so there is no hint.
func baseURLHint(cfg config, reason string) string {
	if cfg.baseURL == "" || cfg.provider == "anthropic" || !strings.Contains(reason, "HTTP 404") {
		return ""
	}
	if strings.HasSuffix(strings.TrimRight(cfg.baseURL, "/"), "/v1") {
		return ""
	}
	return fmt.Sprintf(" (-base-url is the API root, which usually ends in /v1: try %s/v1)", strings.TrimRight(cfg.baseURL, "/"))
}

// damageHint names the commands that deal with a damaged -store (the file
// store) when err says that the store's data is damaged: verify lists what is, salvage
// copies what is not into a new file the session can go on from.
func damageHint(store string, err error) string {
	if store == "" || isPostgres(store) || !errors.Is(err, durability.ErrDamaged) {
		return ""
	}
	return fmt.Sprintf(" (go run ./cmd/polyweave-store verify %s lists what is damaged; go run ./cmd/polyweave-store salvage %s NEW.db copies what is intact into NEW.db, to give -store)",
		shellQuote(store), shellQuote(store))
}

// stoppedForGood is the reason an attempt failed when the loop stopped.
const stoppedForGood = "the tool loop stopped"

// tally is what the summary counts over every agent of the run.
type tally struct {
	iterations, calls, failed int
	// unresolved names the failed calls the model never made again with
	// success: the answer was given without what they were for.
	unresolved []string
}

func (d *driver) tally(lead *models.Answer) tally {
	d.mu.Lock()
	answers := append([]*models.Answer{lead}, d.subs...)
	d.mu.Unlock()
	var t tally
	for _, ans := range answers {
		if ans == nil {
			continue
		}
		for _, r := range ans.Rounds {
			if r.Complete() {
				t.iterations++
			}
		}
		if ans.Answered {
			t.iterations++
		}
		t.calls += ans.ToolCalls()
		t.failed += ans.FailedCalls()
		t.unresolved = append(t.unresolved, unresolved(ans)...)
	}
	return t
}

// outcome is the summary's first word: ok, failed, or, when the model
// answered without making a failed call again, which calls it gave up on.
func (t tally) outcome(err error) string {
	switch {
	case err != nil:
		return "failed"
	case len(t.unresolved) == 0:
		return "ok"
	}
	return "answered, but " + strings.Join(t.unresolved, ", ") + " failed and " +
		map[bool]string{true: "was", false: "were"}[len(t.unresolved) == 1] + " never retried"
}

// unresolved lists the error results of ans that no later call of the
// same tool with the same arguments made good.
func unresolved(ans *models.Answer) []string {
	var out []string
	for i, r := range ans.Rounds {
		for j, res := range r.Results {
			if !res.IsError || j >= len(r.Calls) || retried(ans.Rounds[i+1:], r.Calls[j]) {
				continue
			}
			kind := res.FailureKind
			if kind == "" {
				kind = "error"
			}
			out = append(out, fmt.Sprintf("%s %s (%s)", res.Name, res.CallID, kind))
		}
	}
	return out
}

func retried(later []models.Round, call models.ToolCall) bool {
	for _, r := range later {
		for j, c := range r.Calls {
			if c.Name == call.Name && bytes.Equal(c.Arguments, call.Arguments) && j < len(r.Results) && !r.Results[j].IsError {
				return true
			}
		}
	}
	return false
}

// plural is n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
