// Package telemetry traces and measures agent runs with OpenTelemetry,
// following the GenAI semantic conventions.
//
// A [Telemetry] takes a tracer and a meter provider from its options
// (nothing is exported, and no global is set or read, unless the host
// passes providers). It wraps duplexes:
//
//   - [Telemetry.Agent] wraps the outermost stage of an agent (a tool
//     loop): each stream is a run, one "invoke_agent" span; each
//     TOOL_CALL the consumer sees starts an "execute_tool {name}" span,
//     child of the run, ended by its TOOL_RESULT with the outcome
//     (polyweave.tool.outcome "ok" or "error") and, for a failure, its
//     failure kind as error.type;
//   - [Telemetry.Model] wraps a model adapter: each request is a
//     "chat {model}" span, child of the run of the same stream id, with
//     the request model, token usage (gen_ai.usage.input_tokens and
//     output_tokens), finish reasons, and as span events the waits and
//     retries of a resilience transport (META model_call).
//
// Runs and model requests meet by stream id through the Telemetry they
// share, whatever actors they cross, so a run is one trace.
//
// Metrics: gen_ai.client.operation.duration (seconds, per model request
// and per tool call, by operation, tool name and outcome) and
// gen_ai.client.token.usage (tokens, by gen_ai.token.type).
//
// Without tracing, do not wrap: an unwrapped agent pays nothing.
package telemetry
