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
// {}. [Tool.Spec] is the tool's duplex actor. Declare a tool's
// capabilities: one given none is described with the default ["read"]
// but is not read-only ([Description.ReadOnly]), so approval policies
// ask before it runs and MCP clients are not told it only reads.
//
// Every call gets exactly one TOOL_RESULT: the handler's result, or
// {"success":false,"error":"..."} (meta.is_error) for an unknown tool,
// invalid arguments, a handler error, a panic (a handler's panic on a
// tool actor fails the actor, which its supervisor restarts, and its
// other calls in flight are answered too; a panic while validating the
// arguments, or of a Sync handler a stage runs inline, is that call's
// result alone, and the tool actor or the stage goes on serving), a
// timeout ("Tool <name> timed out after <ms>ms"; the handler's context is
// cancelled and a late result is discarded), a CANCEL/ABORT (a streaming
// call whose arguments it cuts short is answered as cancelled, once; one
// whose stream merely ends first, as invalid arguments: the model's END
// of one of several calls of a router's consumer on a stream ends the
// call of that id alone, and its second END of such a call, however late,
// ends none, see [NewRouter]), or a tool
// that is gone or whose circuit breaker is open ([BreakerOptions]). Error
// results made here carry a [FailureKind] in the frame's
// Meta.FailureKind ([KindOf]); the model reads only the payload. Results
// reach the model as the JSON the handler's value encodes to, without
// HTML escaping ("<", ">" and "&" as themselves).
//
// # Stages
//
// [NewRouter], [NewAsyncRouter] and [NewStreamingRouter] wrap a model
// adapter: TOOL_CALLs on its response path run on tool actors that are the
// router's children, and each result is written back into the adapter's
// sink. [NewInstaller] also injects tools, tool_choice and a system prompt
// into every request (or the first only, [InstallerOptions].Once).
// [NewLoop] runs whole tool conversations: it sends
// the follow-up requests itself until the model answers without calls.
// [NewCallRunner] is a router without a model, for calls made outside any
// conversation (an MCP server's): TOOL_CALLs written into it run, their
// TOOL_RESULTs come out, and each stream is closed with END once answered.
// What a caller still sends of a call answered early (cancelled, failed)
// is dropped and closes the stream with an END of its own each time, so a
// caller stops sending a call once it has its result.
// The decision logic of every stage ([Assembler], [PendingCalls],
// [Breaker]) is plain data with step methods, tested without actors.
//
// # Model adapters
//
// Every stage wraps a model adapter: a duplex that speaks the
// model-adapter contract of package models (documented there, once). The
// stages write requests (PARAM frames named [models.ParamMessages],
// [models.ParamTools], [models.ParamToolChoice], ..., then END) into its
// sink and read its responses (TEXT, TOOL_CALL, META, END, or ERROR then
// END); the conversation is a list of [models.Message] in the OpenAI chat
// shape.
//
// # Concurrency
//
// Tools, definitions and options are immutable once built and may be
// shared. Stage logic runs on its actor's goroutine; the hooks it calls
// ([LoopOptions.OnToolResult]) run there too and must not block. Handlers
// run on their own goroutines unless Sync.
package tools
