// Package tools runs LLM tool calls as supervised actors: the tool duplex,
// the sync, async and streaming routers, the installer and the tool loop
// of @polyweave/tools, on the duplex runtime of package actors.
//
// # Tools
//
// A [Definition] (name, description, capabilities, flags, JSON Schema,
// [HandlerFunc], timeout, Sync) becomes an immutable [Tool] with [New];
// [NewTyped] binds a typed Go function and infers the input schema from
// its input type. Arguments are validated against the schema before the
// handler runs: invalid or truncated JSON and schema violations become an
// error result naming the place ([ArgumentsError]); empty arguments mean
// {}. [Tool.Spec] is the tool's duplex actor.
//
// Every call gets exactly one TOOL_RESULT: the handler's result, or
// {"success":false,"error":"..."} (meta.is_error) for an unknown tool,
// invalid arguments, a handler error, a panic (the tool actor is restarted
// by its supervisor; its other calls in flight are answered too), a
// timeout ("Tool <name> timed out after <ms>ms"; the handler's context is
// cancelled and a late result is discarded), a CANCEL/ABORT, or a tool
// that is gone or whose circuit breaker is open ([BreakerOptions]). Error
// results made here carry a [FailureKind] in the frame's Text.
//
// # Stages
//
// [NewRouter], [NewAsyncRouter] and [NewStreamingRouter] wrap a model
// adapter: TOOL_CALLs on its response path run on tool actors that are the
// router's children, and each result is written back into the adapter's
// sink. [NewInstaller] also injects tools, tool_choice and a system prompt
// into the first request. [NewLoop] runs whole tool conversations: it sends
// the follow-up requests itself until the model answers without calls.
// The decision logic of every stage ([Assembler], [PendingCalls],
// [Breaker]) is plain data with step methods, tested without actors.
//
// # The model-adapter contract
//
// A model adapter is a duplex (an actors.Spec) that these stages wrap.
// Frames of one request/response exchange share a stream id.
//
// Request (into the adapter's sink): PARAM frames, each a name and a JSON
// value — "messages" (an array of OpenAI chat messages: system, user,
// assistant with optional tool_calls, tool), "tools" (an array in OpenAI
// chat format, see [FunctionList]), "tool_choice", "model", sampling
// parameters and whatever else the adapter understands — then END, which
// says the request is complete and starts the model. A stream may carry
// several requests one after the other (the loop's follow-ups): each is
// PARAMs then END, sent after the previous response ended. CANCEL or
// ABORT for a stream with a response in flight stops it (the adapter ends
// the response with END, or ERROR then END); for a stream without one the
// adapter ignores them. TOOL_RESULT frames written into the sink by a
// router are the adapter's to use (or ignore) for its next request.
//
// Response (from the adapter's source), per request: any number of TEXT
// frames (content, in order), TOOL_CALL frames — atomic (tool_call_id,
// name, complete JSON arguments in the payload) or streaming (a TOOL_CALL
// with meta.streaming and no payload, then TEXT frames with
// meta.tool_arg_stream and the call's tool_call_id carrying pieces of the
// arguments, possibly interleaved with other calls' pieces, then a META
// frame with meta.tool_complete and the tool_call_id) — META frames (usage,
// finish reason...), and finally exactly one END. A failed request ends
// with ERROR (text: what went wrong) then END. Tool-call ids are unique
// within a stream; meta.index is the call's position in the response.
// Arguments are passed as the model produced them: the tools validate.
//
// # Concurrency
//
// Tools, definitions and options are immutable once built and may be
// shared. Stage logic runs on its actor's goroutine; the hooks it calls
// ([LoopOptions.OnToolResult]) run there too and must not block. Handlers
// run on their own goroutines unless Sync.
package tools
