package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
	"github.com/polyweave/polyweave-go/tools"
)

// Defaults of [ServerOptions].
const (
	DefaultServerName       = "polyweave"
	DefaultServerVersion    = "dev"
	DefaultProgressInterval = time.Second
)

// DefaultMaxResultBytes bounds the size of a tool result, as its
// CallToolResult's JSON, that a [Server] sends unless
// ServerOptions.MaxResultBytes says otherwise: go-sdk's stdio and
// in-memory transports (and so [Import] of a server run as a command)
// refuse a JSON-RPC frame over sdk.DefaultMaxLineLength (16 MiB) by
// ending the whole session, and the limit leaves room for the frame's
// envelope. An object result counts twice: it is sent as text and as
// structuredContent.
const DefaultMaxResultBytes = sdk.DefaultMaxLineLength - resultEnvelope

// resultEnvelope is the room left in a frame beside its result: the
// JSON-RPC envelope, with its request id.
const resultEnvelope = 64 << 10

// ServerOptions configure a [Server]. A nil *ServerOptions or a zero field
// means the default. Options are copied by [NewServer].
type ServerOptions struct {
	// Name and Version identify the server to clients (the serverInfo of
	// the initialize result); defaults "polyweave" and "dev".
	Name, Version string
	// Instructions, when set, are sent to clients at initialization.
	Instructions string
	// Tools are the tools served. Their names must be unique; at least one
	// is needed.
	Tools []*tools.Tool
	// Breaker configures the per-tool circuit breaker of the router that
	// runs the calls.
	Breaker tools.BreakerOptions
	// Supervision supervises the tool actors; nil means the runtime's
	// default.
	Supervision *supervisor.Strategy
	// ProgressInterval is how often a call whose request carried a
	// progress token is reported with notifications/progress while it
	// runs (progress = seconds elapsed, no total); default 1s, a negative
	// value sends none.
	ProgressInterval time.Duration
	// Logger receives the MCP library's log; nil discards it.
	Logger *slog.Logger
	// MaxResultBytes bounds the size of a result the server sends, as the
	// JSON of its CallToolResult: a call whose result is larger is
	// answered with an isError result saying so (with both sizes), of
	// failure kind tools.FailureTooLarge ([FailureKindMeta]), which
	// keeps the client's session, where the larger result would end it.
	// Zero means DefaultMaxResultBytes; a negative value sends results of
	// any size (for clients known to take them).
	MaxResultBytes int
}

// Server serves tools to MCP clients: tools/list answers each tool's
// DESCRIBE description (name, description, input and output schema, and
// annotations from its flags), and tools/call runs the call as a
// TOOL_CALL through a tool router on the runtime (see [NewServer]). One
// Server serves any number of sessions, over stdio ([Server.ServeStdio]),
// streamable HTTP ([Server.Handler]) or any go-sdk transport
// ([Server.Run]). It is safe for concurrent use.
type Server struct {
	opts      ServerOptions
	sdk       *sdk.Server
	calls     *caller
	progress  time.Duration
	maxResult int // negative: no limit
}

// ErrNoTools is returned by [NewServer] when there is nothing to serve.
var ErrNoTools = errors.New("mcp: no tools to serve")

// ErrNotLoopback is returned (wrapped) by [Server.ListenHTTP] for an
// address that is not loopback when [HTTPOptions].AllowRemote is not set.
var ErrNotLoopback = errors.New("not a loopback address")

// NewServer starts a tool router for opts.Tools on rt and returns a server
// for them. Every tools/call becomes one TOOL_CALL on that router, so the
// router's guarantees hold for MCP clients: arguments are validated
// against the tool's schema before it runs (a violation is an isError
// result naming the place), the tool's timeout cancels the handler, the
// tool actors are supervised and behind a circuit breaker, and each call
// gets exactly one result. A failed call (error result, or a result
// object with "success": false) is answered as a CallToolResult with
// isError, never as a protocol error: its text is the tool's own JSON
// (its structuredContent too, when it matches the tool's output schema),
// or the message alone for a bare {"success":false,"error":...}, and its
// _meta holds the failure kind ([FailureKindMeta]); a successful object
// result is sent as structuredContent and as its JSON text.
// notifications/cancelled for a call sends CANCEL for it, which cancels
// the handler's context (a command is killed with its process group). A
// result over ServerOptions.MaxResultBytes ([DefaultMaxResultBytes]) is
// answered as an isError result naming its size and the limit, of kind
// tools.FailureTooLarge.
//
// Close stops the router; the runtime stays the caller's.
func NewServer(rt *actors.Runtime, o *ServerOptions) (*Server, error) {
	if rt == nil {
		return nil, errors.New("mcp: nil runtime")
	}
	var opts ServerOptions
	if o != nil {
		opts = *o
	}
	opts.Tools = slices.Clone(opts.Tools)
	if len(opts.Tools) == 0 {
		return nil, ErrNoTools
	}
	if opts.Name == "" {
		opts.Name = DefaultServerName
	}
	if opts.Version == "" {
		opts.Version = DefaultServerVersion
	}
	progress := opts.ProgressInterval
	if progress == 0 {
		progress = DefaultProgressInterval
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var mcpTools []*sdk.Tool
	for _, t := range opts.Tools {
		if t == nil {
			return nil, errors.New("mcp: nil tool")
		}
		mt, err := describe(t)
		if err != nil {
			return nil, err
		}
		mcpTools = append(mcpTools, mt)
	}
	calls, err := newCaller(rt, "mcp-"+opts.Name, opts.Tools, opts.Breaker, opts.Supervision)
	if err != nil {
		return nil, fmt.Errorf("mcp: %w", err)
	}
	maxResult := opts.MaxResultBytes
	if maxResult == 0 {
		maxResult = DefaultMaxResultBytes
	}
	s := &Server{opts: opts, calls: calls, progress: progress, maxResult: maxResult}
	s.sdk = sdk.NewServer(&sdk.Implementation{Name: opts.Name, Version: opts.Version},
		&sdk.ServerOptions{Instructions: opts.Instructions, Logger: logger})
	for i, mt := range mcpTools {
		s.sdk.AddTool(mt, s.handler(opts.Tools[i].Name(), outputCheck(opts.Tools[i].Description().OutputSchema)))
	}
	return s, nil
}

// describe turns a tool's DESCRIBE description into an MCP tool.
func describe(t *tools.Tool) (*sdk.Tool, error) {
	d := t.Description()
	var schema map[string]any
	if err := json.Unmarshal(d.Schema, &schema); err != nil || schema["type"] != "object" {
		return nil, fmt.Errorf("mcp: tool %q: MCP needs an input schema of type object", d.Name)
	}
	mt := &sdk.Tool{Name: d.Name, Description: d.Description, InputSchema: d.Schema,
		Annotations: annotations(d)}
	if len(d.OutputSchema) > 0 {
		mt.OutputSchema = d.OutputSchema
	}
	return mt, nil
}

// outputCheck reports whether a value conforms to a tool's output schema;
// nil when the tool has none (any value does). A schema that does not
// compile (or refers to other documents) conforms nothing: no error
// result is sent as structuredContent that a client would refuse.
func outputCheck(schema json.RawMessage) func(any) bool {
	if len(schema) == 0 {
		return nil
	}
	c := jsonschema.NewCompiler()
	c.LoadURL = func(url string) (io.ReadCloser, error) {
		return nil, fmt.Errorf("load %s: schemas may not reference other documents", url)
	}
	const url = "polyweave://tool/output.json"
	var compiled *jsonschema.Schema
	if c.AddResource(url, bytes.NewReader(schema)) == nil {
		compiled, _ = c.Compile(url)
	}
	return func(v any) bool { return compiled != nil && compiled.Validate(v) == nil }
}

// annotations maps a tool's flags to MCP's hints: read-only when it
// declared "read" as its only capability ([tools.Description.ReadOnly]),
// destructive when it is not reversible (a hint that only means
// something for a tool that is not read-only), idempotent as declared.
// A tool that declared no capabilities is neither read-only nor said to
// be harmless: its destructive hint is left out, which MCP reads as
// destructive, since its reversible flag is then only the default too.
func annotations(d tools.Description) *sdk.ToolAnnotations {
	readOnly := d.ReadOnly()
	a := &sdk.ToolAnnotations{ReadOnlyHint: readOnly, IdempotentHint: d.Idempotent}
	if !readOnly && d.CapabilitiesDeclared() {
		destructive := !d.Reversible
		a.DestructiveHint = &destructive
	}
	return a
}

// SDK is the go-sdk server, for hosts that add resources, prompts or
// more tools of their own, or connect it to a transport themselves.
func (s *Server) SDK() *sdk.Server { return s.sdk }

// Run serves one session over t until the client disconnects or ctx ends.
func (s *Server) Run(ctx context.Context, t sdk.Transport) error {
	return s.sdk.Run(ctx, t)
}

// ServeStdio serves one session over the process's stdin and stdout (how
// MCP clients run local servers) until stdin closes or ctx ends.
func (s *Server) ServeStdio(ctx context.Context) error {
	return s.Run(ctx, &sdk.StdioTransport{})
}

// Close ends every session of the server (over any transport), stops the
// tool router and its tool actors, and waits for them or until ctx ends.
// Calls still running are answered with error results.
func (s *Server) Close(ctx context.Context) error {
	for ss := range s.sdk.Sessions() {
		_ = ss.Close()
	}
	return s.calls.close(ctx)
}

func (s *Server) handler(name string, conforms func(any) bool) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		var args json.RawMessage
		if req.Params != nil {
			args = req.Params.Arguments
		}
		cl, err := s.calls.start(name, args)
		if err != nil {
			return errorResult(err.Error()), nil
		}
		if req.Params != nil && s.progress > 0 && req.Session != nil {
			if token := req.Params.GetProgressToken(); token != nil {
				defer s.reportProgress(ctx, req.Session, token, name)()
			}
		}
		f := cl.wait(ctx)
		r := resultOf(f, conforms)
		if size := oversized(r, len(f.GetPayload()), s.maxResult); size > 0 {
			r = errorResult(fmt.Sprintf("Tool %s ran, but its result is too large to send: %d bytes, limit %d", name, size, s.maxResult))
			r.Meta = sdk.Meta{FailureKindMeta: string(tools.FailureTooLarge)}
		}
		return r, nil
	}
}

// oversized returns the size of r's JSON when it is over limit (none when
// limit is negative), and otherwise 0. r is made of a payload of
// payloadLen bytes, which it holds at most twice, as text and as
// structuredContent, each byte of it encoded to at most
// maxEscapedBytes bytes in either, so a result whose payload is small
// enough is not encoded to learn that it fits.
func oversized(r *sdk.CallToolResult, payloadLen, limit int) int {
	if limit < 0 || payloadLen <= maxUnmeasuredPayload(limit) {
		return 0
	}
	b, err := json.Marshal(r)
	if err != nil || len(b) <= limit {
		return 0 // one that cannot be encoded is go-sdk's to refuse
	}
	return len(b)
}

// maxEscapedBytes is the most bytes one byte of a payload takes in a
// JSON string as go-sdk encodes it: "<", ">" and "&" (which go-sdk
// escapes, HTML-safe), control characters and a byte that is not UTF-8
// each become a six-byte \uXXXX escape.
const maxEscapedBytes = 6

// resultOverhead is the room a result takes beside its payload: its own
// members, the failure kind in _meta.
const resultOverhead = 1 << 10

// maxUnmeasuredPayload is the largest payload whose result surely fits
// in limit bytes: twice (text and structuredContent) escaped at worst,
// with the result's own members.
func maxUnmeasuredPayload(limit int) int {
	return (limit - resultOverhead) / (2 * maxEscapedBytes)
}

// reportProgress sends notifications/progress for a running call every
// progress interval until the returned stop is called (or ctx ends);
// stop returns once no notification is being sent, so that none follows
// the call's result.
func (s *Server) reportProgress(ctx context.Context, ss *sdk.ServerSession, token any, name string) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(s.progress)
		defer t.Stop()
		began := time.Now()
		for {
			select {
			case <-t.C:
				elapsed := time.Since(began)
				_ = ss.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: token,
					Progress: elapsed.Seconds(), Message: fmt.Sprintf("%s running for %s", name, elapsed.Round(time.Second))})
			case <-ctx.Done():
				return
			case <-quit:
				return
			}
		}
	}()
	return func() { close(quit); <-done }
}

// FailureKindMeta is the key of the _meta member in which a [Server]'s
// isError result carries the failure kind of the tool's error result
// (see tools.FailureKind), and from which an import ([Import]) takes
// the kinds tools.FailureInvalidArguments, tools.FailureNotFound and
// tools.FailureTooLarge back: a call the remote tool refused as asking
// what cannot be done, or for what is not there, or whose result was too
// large for the server to send, does not count against the imported
// tool's circuit breaker.
const FailureKindMeta = "polyweave/failureKind"

// resultOf turns a TOOL_RESULT into an MCP result. An error result, or a
// result object whose "success" is false (how tools report a refusal),
// is an isError result. Its text is the error message alone when the
// object says nothing more ({"success":false,"error":...}), and otherwise
// the object's JSON, as the model of a loop reads it (read_file's refusal
// names its path), which is then also its structuredContent when it
// conforms to the tool's output schema (conforms; nil when the tool has
// none), which clients may check it against. The failure kind of an
// error result is in _meta ([FailureKindMeta]). A successful JSON string
// is sent as its text; an object also as structuredContent.
func resultOf(f *messages.Frame, conforms func(any) bool) *sdk.CallToolResult {
	payload := f.GetPayload()
	var head resultHead
	isObject := firstByte(payload) == '{'
	if isObject && (f.IsErrorResult() || mayHoldSuccess(payload)) {
		head = decodeHead(payload)
	}
	if f.IsErrorResult() || (head.Success != nil && !*head.Success) {
		var obj map[string]any
		if isObject {
			obj = decodeObject(payload)
		}
		msg, plain := string(payload), false
		var s string
		if len(head.Error) > 0 && json.Unmarshal(head.Error, &s) == nil && s != "" && len(obj) <= 2 {
			msg, plain = s, true // the message alone: the object holds nothing else
		}
		r := errorResult(msg)
		if obj != nil && !plain && (conforms == nil || conforms(obj)) {
			r.StructuredContent = json.RawMessage(payload)
		}
		if k := f.GetMeta().GetFailureKind(); k != "" && f.IsErrorResult() {
			r.Meta = sdk.Meta{FailureKindMeta: k}
		}
		return r
	}
	switch firstByte(payload) {
	case '"':
		var s string
		if json.Unmarshal(payload, &s) == nil {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
		}
	case '{':
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(payload)}},
			StructuredContent: json.RawMessage(payload)}
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(payload)}}}
}

// resultHead is what resultOf reads of a result object.
type resultHead struct {
	Success *bool           `json:"success"`
	Error   json.RawMessage `json:"error"`
}

// decodeHead decodes the head of a result object; its own function, so
// that the head is on the heap only for results that are decoded.
func decodeHead(payload []byte) resultHead {
	var h resultHead
	_ = json.Unmarshal(payload, &h)
	return h
}

// decodeObject decodes a failed result's object whole (nil when it is
// not one), for resultOf to count its members and check it against the
// tool's output schema.
func decodeObject(payload []byte) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(payload, &m)
	return m
}

func errorResult(msg string) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: msg}}}
}

// mayHoldSuccess reports whether a JSON object might have a "success"
// member, as encoding/json matches names: case-insensitively, and with
// escapes or non-ASCII letters that fold to ASCII ones. When it reports
// false the object surely has none, and a successful result need not be
// decoded to learn so.
func mayHoldSuccess(b []byte) bool {
	const name = "success"
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c == '\\' || c >= utf8.RuneSelf {
			return true
		}
		if i+len(name) <= len(b) && c|0x20 == name[0] && asciiFoldEqual(b[i:i+len(name)], name) {
			return true
		}
	}
	return false
}

// asciiFoldEqual reports whether b is lower, ignoring ASCII case; lower
// is lower-case letters.
func asciiFoldEqual(b []byte, lower string) bool {
	for i := range b {
		if b[i]|0x20 != lower[i] {
			return false
		}
	}
	return true
}

func firstByte(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c
	}
	return 0
}
