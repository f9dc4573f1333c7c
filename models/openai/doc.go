// Package openai is a model adapter for OpenAI-compatible Chat Completions
// streaming endpoints (OpenAI, and the servers people run locally: Ollama,
// vLLM, llama.cpp server, LM Studio), built on the official
// github.com/openai/openai-go SDK (v3) for transport, auth, retries and
// server-sent events.
//
// A [Model] holds the endpoint and its client; [Model.Spec] makes adapter
// duplexes that follow the contract of package models. A request's PARAM
// frames become the fields of the JSON body byte for byte (plus the
// default model, "stream": true and stream_options.include_usage), so
// messages and tools are never re-encoded. The answer streams in a
// background function (actors.Context.Go): each content delta is emitted
// as a TEXT frame as it arrives.
//
// Tool calls are emitted atomically (one TOOL_CALL with complete
// arguments each, in turn order) once the stream has finished properly,
// rather than as streaming calls chunk by chunk. Servers split arguments
// anywhere, key fragments by index and id in several inconsistent ways,
// and only the finish reason tells whether the last call was cut: holding
// the calls until then is what guarantees that a truncated call is never
// delivered as a complete one, and keeps consumers simple. The
// [Accumulator] does the keying; it is a plain struct, usable on its own.
//
// What ends an answer:
//
//   - a finish reason followed by [DONE] (or by the end of the body):
//     tool calls, META usage (when the server sent usage), META finish,
//     END. "stop" with tool calls (a forced tool_choice) still emits them;
//     "length" is a normal end with finish "length" too: a call whose
//     arguments are empty or not whole JSON then was cut off by the limit,
//     and is emitted as a META truncated_call frame
//     (models.MetaTruncatedCall) instead of a TOOL_CALL; "content_filter"
//     emits no tool call at all (the filter may have stopped the answer
//     in the middle of one), as the Anthropic adapter does on a refusal;
//   - no finish reason
//     ([ErrIncomplete]: the stream was cut off), a call without a name or
//     with arguments that are not JSON, or two calls with one id
//     ([ErrInvalidToolCall]), an error event in the stream
//     ([ServerError]), a body that is not an event stream (an HTML page:
//     [ErrNotEventStream], quoting its start), an HTTP error after the
//     SDK's retries ([APIError]), a timeout or a stalled stream: the text already emitted
//     stays, no tool call is emitted, and ERROR (saying why) and END
//     follow;
//   - CANCEL or ABORT: the HTTP request is cancelled, ERROR("cancelled")
//     and END.
//
// Only choice 0 is read (the adapter never asks for n > 1). Refusal
// deltas are emitted as text. Reasoning fields some servers add are
// ignored.
package openai
