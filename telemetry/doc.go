// Package telemetry traces and measures agent runs with OpenTelemetry,
// following the GenAI semantic conventions.
//
// A [Telemetry] takes a tracer and a meter provider from its options
// (nothing is exported, and no global is set or read, unless the host
// passes providers). It taps duplexes: the tapped spec keeps its name,
// supervision and persistence and runs in the same actor, so tracing adds
// no actor hop. In the actor's turn a tap only copies what it saw into an
// event (with its time) and queues it; one recorder goroutine per
// Telemetry turns the events, in order, into spans and measurements, woken
// per batch. Spans carry the times the taps saw, not the times they are
// built: a model request's or a tool call's span is started when it ends,
// with all its attributes at once (earlier only when a span event or a
// nested run needs it), so span processors see it start then.
// [Telemetry.Flush] waits for what is queued (tests call it before reading
// an exporter); [Telemetry.Shutdown] stops the recorder at exit. A
// span processor, exporter or meter of the host that panics there does
// not take the host down: the panic is logged ([Options.Logger]) and what
// was being recorded is lost. An agent
// built with the agent package takes a Telemetry in
// agent.Options.Telemetry.
//
// The queue is bounded ([Options.MaxQueued], default [DefaultMaxQueued]
// events): when the host's span processors or meter block or fall behind,
// the actors are never made to wait and memory does not grow; events that
// find the queue full are dropped. [Telemetry.Dropped] and the counter
// polyweave.telemetry.dropped count them, [Options.Logger] gets one
// warning per burst of drops, and once the recorder has caught up with a
// burst it ends the spans still open of the streams whose events were
// dropped, marked polyweave.telemetry.incomplete (their ends may have been
// dropped; they get no duration metric), and does not record the rest of
// those runs and requests; other streams' spans go on (all of them are
// ended when a dropped event belongs to no stream: see
// [Options.MaxQueued]). Flush and Shutdown still return.
//
//   - [Telemetry.Agent] taps the outermost stage of an agent (a tool
//     loop): each request on a stream (the conversation, sent as the
//     messages parameter) starts a run, one "invoke_agent {name}" span,
//     ended by the stream's END; frames of a stream with no run open are
//     not recorded. Its gen_ai.conversation.id is the stream id, or the
//     conversation's id that [Options].ConversationID gives for it, or,
//     with none, the tap's own mapping ([Telemetry.AgentConversations]:
//     an agent runs each attempt on a stream of its own and gives its
//     session). Each TOOL_CALL the agent emits starts an
//     "execute_tool {tool}" span, child of the run, ended by its
//     TOOL_RESULT with the outcome (polyweave.tool.outcome "ok" or
//     "error") and, for a failure, its failure kind as error.type. A run
//     whose open calls all wait for approval in a session store (the loop
//     said approval_waiting, durable, and no answer came) when its agent
//     is stopped, as a durable agent stops a waiting session's loop, is
//     no failure: the
//     run span ends with polyweave.agent.outcome "awaiting_approval"
//     ([OutcomeAwaitingApproval]) and no error status, its held calls'
//     spans with that polyweave.tool.outcome, and they get no duration
//     metric; the resumed session is a new run with the calls' outcomes.
//     Calls held only in memory (no store) are lost with the agent: their
//     run ends failed, and they end "stopped", as any stopped call.
//     There, a call answered with the result stored when it ran before
//     (see tools.MetaSession) is marked polyweave.tool.reused and gets no
//     duration metric: each call is measured once;
//   - [Telemetry.Model] taps a model adapter: each request is a
//     "chat {model}" span, child of the run of the same stream id in the
//     agent the adapter belongs to, with the request model, token usage
//     (gen_ai.usage.input_tokens and output_tokens), finish reasons, and
//     as span events the waits and retries of a resilience transport
//     (META model_call) and calls cut off by the length limit;
//   - [Telemetry.Supervision], given as actors.RuntimeOptions.OnSupervision,
//     adds each supervision decision (restart, stop, escalation) as a
//     "supervision" span event to the open runs of the agent whose actor
//     failed. A run open in an agent whose own actor fails ends with an
//     error status and an "agent_failed" event; so does a run, or a model
//     request, whose stream a supervisor's Resume answered (the runtime's
//     ERROR and END are its outcome, and what the resumed actor writes on
//     it after, which the runtime drops, is not recorded).
//
// What tools and models write is bounded in the spans: a failed call's
// status is the error message of its result (not the whole result
// object, which may hold a command's output, say), and that, an ERROR's
// text, a failure's message, a resilience transport's error and a tool
// call's id (the model's) are clipped to 1 KiB, and made valid UTF-8
// (what is not is replaced by U+FFFD); the span of a call of a tool that
// does not exist is named "execute_tool" alone.
//
// Runs and model requests meet by stream id and actor path through the
// Telemetry they share, whatever actors they cross, so a run is one trace.
// A run started inside another agent's run (an agent called as a tool
// runs under the calling tool's actor) is a child of that tool call's
// span: a team of agents is one trace.
//
// Metrics (all in the instrumentation scope [ScopeName]):
//
//   - gen_ai.client.operation.duration (s): model requests
//     (gen_ai.operation.name "chat", with provider and model) and tool
//     calls ("execute_tool", with gen_ai.tool.name, polyweave.tool.outcome
//     and error.type); a call of a tool that does not exist (the model
//     named it) is measured as gen_ai.tool.name [OtherTool], and so is
//     every tool beyond the first 256 names, and a call refused at the
//     iteration limit or cut off by the length limit whose name no call
//     that reached its tool had, so that the model cannot grow (or fill)
//     the series;
//   - gen_ai.client.token.usage ({token}): by gen_ai.token.type;
//   - polyweave.supervision.decisions: restarts, stops and escalations by
//     polyweave.stage (the failed actor's name), error.type ([Cause]) and
//     polyweave.supervision.directive;
//   - polyweave.tool.breaker.state: 0 closed, 1 open, 2 half-open, by
//     gen_ai.tool.name ([Telemetry.BreakerChanged], given as
//     tools.BreakerOptions.OnChange);
//   - polyweave.store.operation.duration (s): durable store calls by
//     polyweave.store.operation and outcome ([Telemetry.Store] wraps a
//     store);
//   - polyweave.telemetry.dropped ({event}): events dropped because the
//     queue was full (an observable counter, reported until Shutdown).
//
// Without providers, Agent, Model and Store return what they are given: a
// host that turns telemetry off pays nothing. With tracing off (no tracer
// provider) the taps allocate nothing for spans.
package telemetry
