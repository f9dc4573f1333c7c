// Package models defines the contract of a model-adapter duplex and the
// pieces its implementations share: the [Request] a stream's PARAM frames
// make, the [Tracker] that keeps the streams of an adapter apart, and the
// [Response] that reads an adapter's answer back into text and tool calls.
//
// Implementations live in sub-packages: models/scripted (a deterministic
// model driven by a script, for tests, benchmarks and the demo) and
// models/openai (OpenAI-compatible Chat Completions streaming). The
// conformance suite every adapter runs is models/modeltest.
//
// # The model-adapter contract
//
// A model adapter is a duplex (an actors.Spec). Routers and tool loops wrap
// it and talk to it only with frames.
//
// Request. For a stream id, PARAM frames carry the request, each a name and
// a raw JSON value:
//
//   - "messages": the conversation, an OpenAI chat-format message array
//     ({"role":"system"|"user"|"assistant"|"tool", ...});
//   - "tools": an array of {"type":"function","function":{"name",
//     "description","parameters"}};
//   - "tool_choice": "auto", "none", "required" or
//     {"type":"function","function":{"name":...}};
//   - "model", "temperature", "max_tokens" and any other sampling
//     parameter, passed through to the model as is.
//
// When a name is sent twice in one request, the last value wins. The END
// frame of the stream completes the request and sends it. Several streams
// may be in flight at once; each gets its own response. A stream may carry
// several requests one after the other (a tool loop sends its follow-up on
// the stream of the first request): a request completed while the previous
// one of the same stream is still being answered waits for it, so answers
// never interleave within a stream.
//
// Response. On the stream of the request, in this order:
//
//   - TEXT frames: deltas of the assistant's content;
//   - TOOL_CALL frames, in the order of the calls in the turn, each either
//     atomic (messages.ToolCall, complete JSON arguments in the payload) or
//     streaming (messages.StreamingToolCall, then messages.ToolArgChunk
//     frames whose concatenation is the arguments, then
//     messages.ToolComplete). Meta.index is the call's position in the turn
//     (0, 1, ...). Empty arguments are sent as {};
//   - META frames: [MetaUsage] with token counts as JSON ({"prompt_tokens",
//     "completion_tokens","total_tokens",...}) when the model reports them,
//     and [MetaFinish] with the finish reason as a JSON string ("stop",
//     "tool_calls", "length", ...); [MetaTruncatedCall] for a call cut off
//     by the length limit (see below); [MetaThinkingBlocks] with
//     reasoning blocks a follow-up must send back;
//   - END.
//
// Whether the turn calls tools is told by the presence of TOOL_CALL frames,
// never by the finish reason: a forced tool_choice ends with "stop".
//
// Failure. When a request fails (HTTP error, stream cut off, a script's
// error turn), the adapter emits what it has validly received (text
// already streamed, nothing of an incomplete tool call), then an ERROR
// frame whose text says why, then END. A truncated or invalid tool call is
// never emitted as a complete call. Without an ERROR, the stream ends with
// META finish and END. An ERROR whose failure a new attempt of the same
// request would meet again (the key refused, a model that does not exist,
// a request the API rejects as malformed) carries [FailurePermanent] as
// its metadata's failure_kind, so that consumers do not retry it.
//
// Length limit. A response that stops on the length limit in the middle
// of a tool call is not a failure: the calls complete before the cut are
// emitted as usual, and each cut call (the last one, or several when the
// server interleaves parallel calls) as a META [MetaTruncatedCall] frame
// instead of a TOOL_CALL, indexed after the complete calls, then META
// finish "length" and END. Consumers answer each cut call with a failed
// result ([TruncatedCallError]) and run nothing of it, so that the model
// learns its call was cut off; every call of the turn gets one result.
// A call with no arguments at all is cut too when the limit ends the
// answer, wherever it stands in the turn, unless the API told that it
// ended (the Messages API's content_block_stop): a server interleaving
// parallel calls may be cut between a call's name and its arguments, and
// nothing else tells that call from a whole one without parameters. A
// call cut before its name (or, where the API sends one, its id) arrived
// is dropped: nothing of it is emitted, since a follow-up could not name
// it, and the rest of the answer is emitted as usual. Both HTTP adapters
// (models/openai, models/anthropic) behave so.
//
// Content filter. An answer the provider's filter stopped (finish
// "content_filter": OpenAI's content_filter, the Messages API's refusal)
// emits its text and no tool call at all, whole, empty or cut: the filter
// may have stopped it in the middle of a call, and nothing of a turn the
// provider refused is run.
//
// Tool results. TOOL_RESULT frames written into the adapter's sink are
// informational: adapters ignore them. A tool loop sends the follow-up
// request (the assistant message with its tool_calls and one "tool" message
// per call id, in call order) as a new set of PARAM frames and END.
//
// Cancellation. CANCEL or ABORT for a stream (without a tool-call id: a
// CANCEL naming a tool call is for tools and is ignored) stops the request
// in flight (its context is cancelled, its timers stopped) and answers every
// request of that stream not yet ended with ERROR([ErrCancelled]'s text,
// "cancelled") and END. Nothing more is emitted for those requests: a
// request whose PARAMs had come but not its END is answered at once too
// (a client abandoning it does not wait for an END it may never send),
// and that END, if it comes before another PARAM, is ignored. A stream
// with nothing open ignores them.
//
// Frames of other types written into the sink (TEXT, TICK, DESCRIBE, ...)
// are ignored.
//
// # Concurrency
//
// An adapter's Logic runs inside an actor and is driven one message at a
// time; slow work runs in actors.Context.Go or waits on actors.Context.After
// timers, never blocking Receive. The types of this package are plain
// values for use inside one Logic (or one goroutine) unless their
// documentation says otherwise.
package models
