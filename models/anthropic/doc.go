// Package anthropic is a model adapter for the Anthropic Messages API
// with streaming, built on the official
// github.com/anthropics/anthropic-sdk-go SDK (v2) for transport, auth,
// retries and server-sent events.
//
// A [Model] holds the endpoint and its client; [Model.Spec] makes adapter
// duplexes that follow the contract of package models. Requests arrive in
// the chat vocabulary of package models (OpenAI's message shapes) and are
// translated into a Messages API request:
//
//   - system (and developer) messages, wherever they are, become the
//     top-level system blocks, in order;
//   - an assistant message becomes one assistant turn: its
//     thinking_blocks (see [MetaThinking]), a text block for its content
//     and one tool_use block per tool call (input: the arguments object;
//     {} for empty or non-object arguments);
//   - "tool" messages become tool_result blocks at the start of the next
//     user turn, is_error set for a result of the form
//     {"success":false,...}; consecutive turns of one role are joined;
//   - tools become {name, description, input_schema}; tool_choice "auto",
//     "none", "required" and a named function become auto, none, any and
//     tool; parallel_tool_calls false sets disable_parallel_tool_use;
//   - max_tokens (or max_completion_tokens) is sent, Options.MaxTokens by
//     default; stop becomes stop_sequences; OpenAI-only fields (seed,
//     stream_options, n, ...) are dropped; any other PARAM (temperature,
//     top_k, thinking, metadata, ...) is sent as it is.
//
// The answer streams in a background function: each text_delta is
// emitted as a TEXT frame as it arrives. Content blocks are keyed by
// their index, so deltas of several blocks may interleave; tool_use
// blocks are emitted as atomic TOOL_CALL frames, in block order, once the
// stream has ended with message_stop (the [Accumulator] does the keying
// and is usable on its own). Then come the META frames: thinking_blocks
// when the model thought, usage (prompt_tokens counting cached tokens,
// completion_tokens, total_tokens, prompt_tokens_details.cached_tokens,
// and the API's own input, output and cache counts), and finish, the stop
// reason in the vocabulary of package models (end_turn and stop_sequence
// → "stop", tool_use → "tool_calls", max_tokens → "length", refusal →
// "content_filter", others as they are).
//
// A tool_use block still open when the answer stops on max_tokens was
// cut off by the length limit: it is emitted as a META truncated_call
// frame (models.MetaTruncatedCall) after the complete calls, and the
// answer ends normally with finish "length".
//
// What ends an answer with ERROR and END instead (text already emitted
// stays, no tool call is emitted): a stream cut off before message_stop
// ([ErrIncomplete]), a tool_use without id or name, with the id of
// another, or with an input that is not a JSON object
// ([ErrInvalidToolCall]), events out of order ([ErrProtocol]), a body
// that is not an event stream (an HTML page: [ErrNotEventStream], quoting
// its start), an error event in the stream or an HTTP error after the
// SDK's retries (an [*APIError] saying what the server said), a timeout
// or a stalled stream; and CANCEL or ABORT (ERROR "cancelled"). A refusal
// ends normally without its tool calls.
package anthropic
