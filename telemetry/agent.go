package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/tools"
)

// Agent taps the outermost stage of an agent (a tool loop), see the
// package doc. The spec keeps its name, supervision and persistence: no
// actor is added. With neither tracing nor metrics on, it returns inner
// unchanged. Its runs' gen_ai.conversation.id is the stream id, unless
// [Options].ConversationID maps it: a bare tool loop's stream is its
// conversation. See [Telemetry.AgentConversations] for a stage whose
// streams are not.
func (t *Telemetry) Agent(inner actors.Spec) actors.Spec {
	return t.AgentConversations(inner, nil)
}

// AgentConversations taps inner as [Telemetry.Agent] does, with
// conversationID giving the gen_ai.conversation.id of its runs from their
// stream ids, for this tap only: an agent of package agent runs each
// attempt of a session on a stream of its own ("<session>#<n>", see
// agent.StreamID) and taps its loop with agent.SessionOf's session here,
// while a bare loop tapped by the same Telemetry keeps its stream id.
// [Options].ConversationID, when the host set one, wins over
// conversationID; a nil conversationID is Agent's stream id. It runs on
// the recorder goroutine as Options.ConversationID does, and must be
// quick; an empty id leaves the attribute out.
func (t *Telemetry) AgentConversations(inner actors.Spec, conversationID func(stream string) string) actors.Spec {
	if t.rec == nil {
		return inner
	}
	name := t.agentName
	if name == "" {
		name = inner.Name
	}
	return tap(inner, func() observer { return &agentObserver{t: t, name: name, conversation: conversationID} })
}

// toolSpan is a tool call open in a run. Its span is started when the
// call is answered, with all its attributes at once, or earlier when a
// run nested in the call needs it as a parent (toolContext).
type toolSpan struct {
	name, callID string
	start        time.Time
	ctx          context.Context // carries span; nil until the span is started
	span         trace.Span
	// held: the loop said the call waits for approval in its session
	// store (approval_waiting, durable) and no answer was sent since.
	held bool
	// reused: the call's result is the one a resumed session stored when
	// the call ran before (it is not run again).
	reused bool
	// stopped is the "stopped" result of a held call, kept until the
	// incarnation's end says why it stopped: a stop while the run waits
	// for approval is no failure of the call.
	stopped *stoppedResult
}

// stoppedResult is the "stopped" result of a held call.
type stoppedResult struct {
	at      time.Time
	message string
}

// agentObserver is the tap of one incarnation of an agent. in, out and
// failed run in the agent's turn and only queue events; the rest runs on
// the recorder's goroutine.
type agentObserver struct {
	listed
	t    *Telemetry
	name string // gen_ai.agent.name
	// conversation is the tap's own mapping of stream ids to
	// gen_ai.conversation.id (AgentConversations); Options.ConversationID
	// wins over it.
	conversation func(stream string) string

	runs     map[string]*liveRun // by stream id
	untraced map[string]toolSpan // with metrics only: stream and call id → call
	// reused are the calls a resumed session said it answers with their
	// stored results (META session), by stream and call id, until their
	// TOOL_CALL frames, which follow at once, or until their stream is
	// abandoned (the frames may have been dropped).
	reused map[string]bool
}

// in records the request that starts a run: its messages. Nothing else
// an agent gets starts one: a stream's later frames (an approval, a
// cancellation) may come after its run ended, or was abandoned when
// events were dropped, and a run started by them would never end. An
// approval answer is recorded too: the call it answers no longer waits.
func (o *agentObserver) in(c actors.Context, f *messages.Frame) {
	switch {
	case f.IsParam(models.ParamMessages):
		if !o.t.tracing {
			return
		}
		ev := frameEvent(evIn, o, f)
		ev.actor = c.Self().String()
		o.t.rec.put(&ev)
	case f.GetType() == messages.FrameType_META && f.GetName() == tools.MetaApproval:
		ev := frameEvent(evIn, o, f)
		o.t.rec.put(&ev)
	}
}

func (o *agentObserver) out(f *messages.Frame) {
	switch f.GetType() {
	case messages.FrameType_TOOL_CALL, messages.FrameType_TOOL_RESULT, messages.FrameType_ERROR, messages.FrameType_END:
	case messages.FrameType_META:
		if n := f.GetName(); n != tools.MetaApprovalWaiting && n != tools.MetaSession {
			return
		}
	default:
		return
	}
	ev := frameEvent(evOut, o, f)
	o.t.rec.put(&ev)
}

func (o *agentObserver) failed(_ actors.Context, err error) {
	o.t.rec.put(&event{kind: evFailed, to: o, at: time.Now(), err: err})
}

func (o *agentObserver) resumed(a actors.ResumeAnswered, err error) {
	o.t.rec.put(resumedEvent(o, a, err))
}

func (o *agentObserver) handle(ev *event) {
	switch {
	case ev.kind == evFailed:
		o.failedAll(ev)
	case ev.kind == evResumed:
		o.resumedRun(ev)
	case ev.ftype == messages.FrameType_META:
		o.meta(ev)
	case !o.t.tracing:
		o.untracedOut(ev)
	case ev.kind == evIn:
		o.start(ev)
	default:
		o.tracedOut(ev)
	}
}

// start opens the run of a stream at its request. A run started
// inside another agent's run (an agent called as a tool runs under the
// calling tool's actor) is a child of that run's tool call: one trace
// for the whole delegation.
func (o *agentObserver) start(ev *event) {
	if _, ok := o.runs[ev.stream]; ok {
		return
	}
	// The parent first: finding it may start the calling tool's span,
	// which fills the scratch slice too.
	parent := o.t.enclosing(ev.actor, o.name)
	attrs := append(o.t.scratch[:0], opInvokeAgent, attribute.String("gen_ai.agent.name", o.name))
	if id := o.conversationID(ev.stream); id != "" {
		attrs = append(attrs, attribute.String("gen_ai.conversation.id", id))
	}
	o.t.scratch = attrs
	ctx, span := o.t.startSpan(parent, o.t.spanName("invoke_agent", o.name), ev.at, internalKind, attrs)
	r := o.t.spareRuns.get()
	r.ctx, r.span, r.actor = ctx, span, ev.actor
	if o.runs == nil {
		o.runs = map[string]*liveRun{}
	}
	o.runs[ev.stream] = r
	o.t.addRun(ev.stream, r)
}

// conversationID is the gen_ai.conversation.id of a run on stream:
// Options.ConversationID's, else the tap's own mapping's
// (AgentConversations), else the stream id; clipped as the spans' texts
// are.
func (o *agentObserver) conversationID(stream string) string {
	conversation := o.t.conversation
	if conversation == nil {
		conversation = o.conversation
	}
	if conversation == nil {
		return stream
	}
	return clipText(conversation(stream))
}

// Attributes every span of a kind has.
var (
	opInvokeAgent = attribute.String("gen_ai.operation.name", "invoke_agent")
	opExecuteTool = attribute.String("gen_ai.operation.name", "execute_tool")
	opChat        = attribute.String("gen_ai.operation.name", "chat")
	outcomeOK     = attribute.String("polyweave.tool.outcome", "ok")
	outcomeError  = attribute.String("polyweave.tool.outcome", "error")
	// outcomeAwaiting ends the span of a call held for approval when its
	// agent is stopped while the run waits (a durable session, resumed
	// later: the resumed run has the call's real outcome).
	outcomeAwaiting = attribute.String("polyweave.tool.outcome", OutcomeAwaitingApproval)
	// reusedResult marks the span of a call a resumed session answered
	// with its stored result.
	reusedResult = attribute.Bool("polyweave.tool.reused", true)
	// runAwaiting marks a run that ended waiting for approval.
	runAwaiting  = attribute.String("polyweave.agent.outcome", OutcomeAwaitingApproval)
	clientKind   = trace.WithSpanKind(trace.SpanKindClient)
	internalKind = trace.WithSpanKind(trace.SpanKindInternal)
	// incomplete marks a span ended because events were dropped: its end
	// time is when the drops began, and what came after is missing.
	incomplete = incompleteKey.Bool(true)
)

// OutcomeAwaitingApproval is the polyweave.agent.outcome of a run, and
// the polyweave.tool.outcome of its held calls, when the agent was
// stopped while the run waited for approval with its held calls in a
// durability store (tools.ApprovalWaiting.Durable): the session is
// resumed later, so this is no failure. A run whose held calls waited
// only in memory ends failed: nothing resumes it.
const OutcomeAwaitingApproval = "awaiting_approval"

// incompleteKey is the attribute of spans ended because events were
// dropped.
const incompleteKey = attribute.Key("polyweave.telemetry.incomplete")

// toolContext returns the context of a tool call's span, started now if
// it was not.
func (t *Telemetry) toolContext(r *liveRun, ts *toolSpan) context.Context {
	if ts.span == nil {
		attrs := append(t.scratch[:0], opExecuteTool, attribute.String("gen_ai.tool.name", clipText(ts.name)), attribute.String("gen_ai.tool.call.id", clipText(ts.callID)))
		t.scratch = attrs
		ts.ctx, ts.span = t.startSpan(r.ctx, t.spanName("execute_tool", ts.name), ts.start, internalKind, attrs)
	}
	return ts.ctx
}

// endTool ends a tool call's span: with its outcome, and for a failure
// the failure kind as error.type and status (the span is started here,
// with all its attributes, if no nested run needed it before). The span
// of a call of a tool that does not exist is named "execute_tool" alone:
// the model made its name up.
func (t *Telemetry) endTool(r *liveRun, ts *toolSpan, outcome attribute.KeyValue, kind, status string, at time.Time) {
	attrs := append(t.scratch[:0], opExecuteTool, attribute.String("gen_ai.tool.name", clipText(ts.name)), attribute.String("gen_ai.tool.call.id", clipText(ts.callID)), outcome)
	if kind != "" {
		attrs = append(attrs, attribute.String("error.type", kind))
	}
	if ts.reused {
		attrs = append(attrs, reusedResult)
	}
	t.scratch = attrs
	if ts.span == nil {
		name := "execute_tool"
		if kind != string(tools.FailureUnknownTool) {
			name = t.spanName(name, ts.name)
		}
		_, ts.span = t.startSpan(r.ctx, name, ts.start, internalKind, attrs)
	} else {
		ts.span.SetAttributes(attrs[3:]...)
	}
	if status != "" {
		ts.span.SetStatus(codes.Error, status)
	}
	t.endSpan(ts.span, at)
}

func (o *agentObserver) tracedOut(ev *event) {
	// A reused call is forgotten at its TOOL_CALL, whether a run takes it or not.
	reused := ev.ftype == messages.FrameType_TOOL_CALL && o.takeReused(ev)
	r := o.runs[ev.stream]
	if r == nil {
		return
	}
	switch ev.ftype {
	case messages.FrameType_TOOL_CALL:
		for _, ts := range r.tools {
			if ts.callID == ev.callID {
				return
			}
		}
		ts := o.t.spareTools.get()
		ts.name, ts.callID, ts.start, ts.reused = ev.name, ev.callID, ev.at, reused
		r.tools = append(r.tools, ts)
	case messages.FrameType_TOOL_RESULT:
		i := len(r.tools) - 1
		for i >= 0 && r.tools[i].callID != ev.callID {
			i--
		}
		if i < 0 {
			return
		}
		ts := r.tools[i]
		if heldStop(ts, ev) {
			return // ended with the run, once its end says why
		}
		r.tools = slices.Delete(r.tools, i, i+1)
		outcome, kind := toolOutcome(ev)
		if kind != "" {
			o.t.endTool(r, ts, outcomeError, kind, errorText(ev.payload), ev.at)
		} else {
			o.t.endTool(r, ts, outcomeOK, "", "", ev.at)
		}
		if !ts.reused {
			o.t.recordTool(ts.name, outcome, kind, ev.at.Sub(ts.start))
		}
		o.t.spareTools.put(ts, toolSpan{})
	case messages.FrameType_ERROR:
		r.span.SetStatus(codes.Error, clipText(ev.text))
		r.span.SetAttributes(attribute.String("error.type", "run_error"))
	case messages.FrameType_END:
		o.end(ev.stream, r, "", false, false, ev.at)
	}
}

// untracedOut keeps the tool-call metrics when only metrics are on.
func (o *agentObserver) untracedOut(ev *event) {
	key := ev.stream + "\x00" + ev.callID
	switch ev.ftype {
	case messages.FrameType_TOOL_CALL:
		if o.untraced == nil {
			o.untraced = map[string]toolSpan{}
		}
		o.untraced[key] = toolSpan{name: ev.name, start: ev.at, reused: o.takeReused(ev)}
	case messages.FrameType_TOOL_RESULT:
		if call, ok := o.untraced[key]; ok {
			if heldStop(&call, ev) {
				o.untraced[key] = call
				return
			}
			delete(o.untraced, key)
			if !call.reused {
				outcome, kind := toolOutcome(ev)
				o.t.recordTool(call.name, outcome, kind, ev.at.Sub(call.start))
			}
		}
	}
}

// heldStop reports whether ev is the "stopped" result of the held call
// ts, and keeps it in ts: the loop answers its held calls so when its
// incarnation ends, and only the end's reason (observer.failed) tells a
// stop of a run waiting for approval from a failure.
func heldStop(ts *toolSpan, ev *event) bool {
	if !ts.held || !ev.isError || ev.text != string(tools.FailureStopped) {
		return false
	}
	ts.stopped = &stoppedResult{at: ev.at, message: errorText(ev.payload)}
	return true
}

// meta follows the META frames the tap records. A resumed session's
// session frame says which calls are answered with their stored results:
// their spans are marked polyweave.tool.reused and get no duration metric
// (the call ran, and was measured, before). Of the approval frames, a
// durable approval_waiting holds the calls it lists (one without a
// session store is ignored: a stop loses those calls, a failure as any
// other), and an approval answer releases its call.
func (o *agentObserver) meta(ev *event) {
	switch {
	case ev.kind == evIn:
		var a tools.ApprovalAnswer
		if json.Unmarshal(ev.payload, &a) == nil {
			o.hold(ev.stream, a.ToolCallID, false)
		}
		return
	case ev.name == tools.MetaSession:
		var sr tools.SessionEvent
		if json.Unmarshal(ev.payload, &sr) != nil || len(sr.Reused) == 0 {
			return
		}
		if o.reused == nil {
			o.reused = map[string]bool{}
		}
		for _, id := range sr.Reused {
			o.reused[ev.stream+"\x00"+id] = true
		}
		return
	}
	var w tools.ApprovalWaiting
	if json.Unmarshal(ev.payload, &w) != nil || !w.Durable {
		return
	}
	for _, p := range w.Pending {
		o.hold(ev.stream, p.ToolCallID, true)
	}
}

// takeReused reports whether the call of the TOOL_CALL ev is answered
// with its stored result, and forgets it.
func (o *agentObserver) takeReused(ev *event) bool {
	if len(o.reused) == 0 {
		return false
	}
	key := ev.stream + "\x00" + ev.callID
	reused := o.reused[key]
	delete(o.reused, key)
	return reused
}

// hold marks the open call id of stream held for approval, or not.
func (o *agentObserver) hold(stream, id string, held bool) {
	if r := o.runs[stream]; r != nil {
		for _, ts := range r.tools {
			if ts.callID == id {
				ts.held = held
			}
		}
		return
	}
	key := stream + "\x00" + id
	if call, ok := o.untraced[key]; ok {
		call.held = held
		o.untraced[key] = call
	}
}

// toolOutcome is "ok", or "error" with the failure kind of a failed result.
func toolOutcome(ev *event) (outcome, kind string) {
	if !ev.isError {
		return "ok", ""
	}
	if ev.text == "" {
		return "error", "error"
	}
	return "error", ev.text
}

func (t *Telemetry) recordTool(name, outcome, kind string, d time.Duration) {
	if !t.metering {
		return
	}
	name = t.toolSeries(name, kind)
	attrs := []attribute.KeyValue{opExecuteTool,
		attribute.String("gen_ai.tool.name", name), attribute.String("polyweave.tool.outcome", outcome)}
	if kind != "" {
		attrs = append(attrs, attribute.String("error.type", kind))
	}
	t.measure(d.Seconds(), attrs)
}

// end ends a run; failure, when set, is why its agent stopped under it.
// An abandoned run (events were dropped) and its calls are marked
// incomplete. A run awaiting approval (its agent stopped while it
// waited) ends without error, and so do its held calls.
func (o *agentObserver) end(stream string, r *liveRun, failure string, abandoned, awaiting bool, at time.Time) {
	for _, ts := range r.tools { // a call without a result: the run ended under it
		switch {
		case abandoned:
			o.t.toolContext(r, ts)
			ts.span.SetAttributes(incomplete)
			o.t.endSpan(ts.span, notBefore(at, ts.start))
		case awaiting && ts.held:
			o.t.endTool(r, ts, outcomeAwaiting, "", "", notBefore(at, ts.start))
		case ts.stopped != nil:
			o.t.endTool(r, ts, outcomeError, string(tools.FailureStopped), ts.stopped.message, ts.stopped.at)
			o.t.recordTool(ts.name, "error", string(tools.FailureStopped), ts.stopped.at.Sub(ts.start))
		default:
			o.t.toolContext(r, ts)
			ts.span.SetStatus(codes.Error, "no result")
			o.t.endSpan(ts.span, at)
		}
		o.t.spareTools.put(ts, toolSpan{})
	}
	clear(r.tools)
	if abandoned {
		r.span.SetAttributes(incomplete)
	}
	if awaiting {
		r.span.SetAttributes(runAwaiting)
		failure = ""
	}
	if failure != "" {
		r.span.SetStatus(codes.Error, failure)
		r.span.SetAttributes(attribute.String("error.type", "agent_failed"))
	}
	o.t.endSpan(r.span, at)
	delete(o.runs, stream)
	o.t.removeRun(stream, r)
	clear(r.tools)
	o.t.spareRuns.put(r, liveRun{tools: r.tools[:0]}) // its tools slice kept
}

// failedAll ends the runs still open: the runtime closes their streams
// with ERROR and END, which the tap does not see. A run whose calls all
// wait for approval in the session store when its agent is stopped (not
// failed) ends awaiting approval: a durable agent stops a session's loop
// while it waits.
func (o *agentObserver) failedAll(ev *event) {
	stopped := errors.Is(ev.err, actors.ErrStopped)
	for id, r := range o.runs {
		if stopped && awaitingApproval(r.tools) {
			o.end(id, r, "", false, true, ev.at)
			continue
		}
		o.failRun(id, r, ev)
	}
	if len(o.untraced) > 0 {
		o.failedUntraced(stopped)
	}
	o.untraced, o.reused = nil, nil
}

// failRun ends the run of stream r failed, as ev says: its agent failed
// under it.
func (o *agentObserver) failRun(stream string, r *liveRun, ev *event) {
	failure := failureText(ev.err)
	r.span.AddEvent("agent_failed", trace.WithTimestamp(ev.at), trace.WithAttributes(
		attribute.String("error.type", Cause(ev.err)), attribute.String("polyweave.failure", failure)))
	o.end(stream, r, failure, false, false, ev.at)
}

// resumedRun ends, failed, the run of a stream a Resume answered: the
// runtime closed it with ERROR and END, which the tap does not see, and
// drops what the agent writes on it after (a tool call's result among
// them: a call without one has no duration measured, as when the agent
// fails). A call answered alone leaves the run to the calls that go on.
func (o *agentObserver) resumedRun(ev *event) {
	if ev.alone {
		return
	}
	if r := o.runs[ev.stream]; r != nil {
		o.failRun(ev.stream, r, ev)
	}
	deleteStream(o.untraced, ev.stream)
	deleteStream(o.reused, ev.stream)
}

// failedUntraced records, with metrics only, the held calls answered
// "stopped" as failed unless their run was awaiting approval when its
// agent was stopped (as failedAll decides for a traced run).
func (o *agentObserver) failedUntraced(stopped bool) {
	busy := map[string]bool{} // streams with a call open that is not held
	for key, call := range o.untraced {
		if !call.held {
			busy[streamOf(key)] = true
		}
	}
	for key, call := range o.untraced {
		if s := call.stopped; s != nil && (!stopped || busy[streamOf(key)]) {
			o.t.recordTool(call.name, "error", string(tools.FailureStopped), s.at.Sub(call.start))
		}
	}
}

// streamOf is the stream of a key of agentObserver.untraced.
func streamOf(key string) string {
	stream, _, _ := strings.Cut(key, "\x00")
	return stream
}

// awaitingApproval reports whether the open calls of a run all wait for
// approval (the loop said so, and no answer was sent since).
func awaitingApproval(calls []*toolSpan) bool {
	for _, ts := range calls {
		if !ts.held {
			return false
		}
	}
	return len(calls) > 0
}

// notBefore returns at, or start when at is before it: the time a
// span abandoned at at ends.
func notBefore(at, start time.Time) time.Time {
	if at.Before(start) {
		return start
	}
	return at
}

func (o *agentObserver) idle() bool {
	return len(o.runs) == 0 && len(o.untraced) == 0 && len(o.reused) == 0
}

func (o *agentObserver) abandon(at time.Time) {
	for id, r := range o.runs {
		o.end(id, r, "", true, false, at)
	}
	o.untraced, o.reused = nil, nil
}

func (o *agentObserver) abandonStream(stream string, _ bool, at time.Time) {
	if r := o.runs[stream]; r != nil {
		o.end(stream, r, "", true, false, at)
	}
	deleteStream(o.untraced, stream)
	deleteStream(o.reused, stream)
}

// deleteStream deletes the entries of stream from m, whose keys are
// stream + "\x00" + call id.
func deleteStream[V any](m map[string]V, stream string) {
	for k := range m {
		if len(k) > len(stream) && k[len(stream)] == 0 && k[:len(stream)] == stream {
			delete(m, k)
		}
	}
}

// OtherTool is the gen_ai.tool.name the duration of a call of a tool
// that does not exist (answered unknown_tool) is measured under, and
// that of every tool beyond the first maxToolSeries names measured: the
// model names the tools it calls, and a name it made up is no series of
// its own. A call answered before its tool was looked up (refused at the
// iteration limit, cut off by the length limit) is measured under its
// name only when a call of that name reached its tool before.
const OtherTool = "_OTHER"

// maxToolSeries bounds the tool names the duration metric has series
// for (a host's tools are far fewer).
const maxToolSeries = 256

// toolSeries returns the gen_ai.tool.name a call of tool name answered
// with failure kind ("" for a success) is measured under: name, or
// OtherTool (see there).
func (t *Telemetry) toolSeries(name, kind string) string {
	if kind == string(tools.FailureUnknownTool) {
		return OtherTool
	}
	if _, ok := t.toolNames[name]; ok {
		return name
	}
	switch tools.FailureKind(kind) {
	case tools.FailureLimit, tools.FailureTruncated:
		return OtherTool // answered unlooked-up: the name may be made up
	}
	if len(t.toolNames) == maxToolSeries {
		return OtherTool
	}
	t.toolNames[name] = struct{}{}
	return name
}

// maxDescription bounds, in bytes, a span status's description and the
// texts taken from what tools and models write (error messages, a tool
// name the model made up, a tool call's id).
const maxDescription = 1024

// clipText returns s as valid UTF-8 (what is not is replaced by U+FFFD:
// OTLP's strings must be, and an exporter fails a whole batch on one
// that is not), cut to fewer than maxDescription bytes (at a character)
// and marked "…" when it is longer.
func clipText(s string) string {
	if len(s) <= maxDescription && utf8.ValidString(s) {
		return s
	}
	long := len(s) > maxDescription
	s = strings.ToValidUTF8(s[:min(len(s), maxDescription)], "\uFFFD")
	if !long && len(s) <= maxDescription {
		return s
	}
	cut := min(len(s), maxDescription-len("…"))
	for cut > 0 && cut < len(s) && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// errorText returns what the span of a call answered with the failed
// result payload says as its status: the "error" message of the result
// object, not the whole object (a tool's own result object may hold
// anything, a command's output, say), or the payload when it has none;
// clipped (see clipText).
func errorText(payload []byte) string {
	var body struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(payload, &body) == nil && body.Error != "" {
		return clipText(body.Error)
	}
	return clipText(string(payload[:min(len(payload), maxDescription+1)]))
}
