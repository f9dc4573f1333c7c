// Package mcp connects tools to the Model Context Protocol both ways, on
// the official Go SDK (github.com/modelcontextprotocol/go-sdk).
//
// # Serving
//
// [NewServer] serves any set of tools — a router's tools, the workspace
// tools, an agent wrapped as a tool — to MCP clients: tools/list answers
// each tool's description with annotations from its flags, and every
// tools/call runs as a TOOL_CALL through a tool router on the runtime, so
// argument validation, timeouts, supervision, the circuit breaker and
// exactly one result per call hold for MCP clients as for a model. A
// failure is an isError result, never a protocol error, in the tool's own
// JSON (a refusal keeps its shape) with its failure kind in _meta; an
// object result is sent as structuredContent too; notifications/cancelled becomes
// CANCEL; a call whose request carried a progress token is reported with
// notifications/progress while it runs; a result too large for a client
// to take in one frame ([DefaultMaxResultBytes], or
// [ServerOptions].MaxResultBytes) is answered as an isError result saying
// so, of kind tools.FailureTooLarge, which keeps the client's session. [Server.ServeStdio] serves a
// local client over stdio; [Server.Handler] and [Server.ListenHTTP]
// serve streamable HTTP, to this machine's clients alone by default
// (clients on a loopback address, requests no proxy forwarded), refusing
// foreign Host and Origin headers (DNS rebinding) and optionally
// requiring a bearer token; serving clients beyond this machine
// (AllowRemote) requires the token ([HTTPOptions]). cmd/polyweave-mcp
// serves the workspace tools of a folder this way.
//
// # Importing
//
// [Import] connects to an MCP server — a command run over stdio, or a
// streamable HTTP URL — and makes each of its tools a [tools.Tool] for
// routers, loops and agents. Arguments are validated against the
// server's schema before a call is sent. An isError result is an error
// result, of the server's structured content when it sent an object. The
// connection is a supervised
// actor: when the server dies or the connection drops, calls in flight
// get error results, and the server is restarted with back-off and its
// tool list read again; a result the client cannot decode is that call's
// error result, and leaves a connection that still answers a ping be. The
// list is also read again when the server sends
// notifications/tools/list_changed ([ImportOptions].OnToolsChanged hears
// of each change). A call is bounded by its timeout; its timeout or a
// CANCEL reaches the server as notifications/cancelled. The server is
// pinged ([ImportOptions].KeepAlive): one that stops answering is taken
// for gone, its calls in flight are answered with errors, and it is
// connected to again. Closing the import answers the calls waiting or in
// flight with errors too.
//
// # Concurrency
//
// [Server], [HTTPServer] and [Imported] are safe for concurrent use;
// options are copied by the constructors.
package mcp
