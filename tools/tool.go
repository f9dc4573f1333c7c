package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Defaults of a [Definition].
const (
	DefaultName        = "unnamed"
	DefaultTimeout     = 30 * time.Second
	DefaultCapability  = "read"
	defaultSchemaJSON  = `{"type":"object","properties":{},"required":[]}`
	descriptionPattern = "Tool: %s"
)

// NoTimeout as Definition.Timeout disables the timeout (the seed's
// timeoutMs: 0). A zero Timeout means [DefaultTimeout].
const NoTimeout time.Duration = -1

// HandlerFunc runs one tool call. args are the call's JSON arguments,
// already validated against the tool's schema ("" is passed as {}). ctx is
// cancelled when the call times out, is cancelled (CANCEL/ABORT) or the
// tool actor stops. The returned value is encoded as JSON and sent as the
// call's result (nil is sent as {}; a json.RawMessage is sent as is). A
// non-nil error is sent to the model as {"success":false,"error":err.Error()},
// an error result of kind FailureHandler; a [*ResultError] sends its own
// payload and kind instead, and an [*ArgumentsError] (the arguments are
// valid for the schema but not for the handler) is of kind
// FailureInvalidArguments, which does not count against the tool's
// circuit breaker.
//
// An async handler (the default) runs on its own goroutine, so several
// calls of one tool may run at once: a HandlerFunc must be safe for
// concurrent use. A Sync handler runs on the tool actor's goroutine.
type HandlerFunc func(ctx context.Context, args json.RawMessage) (any, error)

// Definition describes a tool. Its zero value is a valid tool named
// "unnamed" that takes an object and answers {}. Definitions are copied by
// [New]; changing one afterwards does not change the tool.
type Definition struct {
	// Name routes calls to the tool; default "unnamed". Names are 1 to 64
	// letters, digits, '_' or '-' (what model APIs accept).
	Name string
	// Description is shown to the model; default "Tool: <name>".
	Description string
	// Capabilities are tags mirrored in the DESCRIPTION: "read" for a tool
	// that only reads, "write", "execute", "network"... as the tool does.
	// A tool given none is described with the seed's default ["read"],
	// but its capabilities count as not declared: it is not read-only
	// ([Description.ReadOnly]), so approval policies ask before it runs
	// and MCP clients are not told it only reads. Declare ["read"] for a
	// tool that only reads.
	//
	// [Tool.Definition] shows the default; a tool made with [New] from
	// that Definition, its Capabilities left as they were, still has no
	// declared capabilities (so wrapping a tool's handler does not make
	// it read-only); setting Capabilities there (["read"] too) declares
	// them.
	Capabilities []string
	// Transactional says the tool's effects are transactional.
	Transactional bool
	// Irreversible says the tool does not support undo. The DESCRIPTION
	// reports reversible = !Irreversible (the seed's default is reversible).
	Irreversible bool
	// Idempotent says that running a call twice has the effect of running
	// it once, so a durable loop may re-run a call interrupted by a crash.
	Idempotent bool
	// DiesWithProcess says a running call's work stops for certain when
	// the process running it dies (a sandboxed command dies with its
	// host), so a durable loop resuming after a crash reports an
	// interrupted call as stopped, not as possibly still running.
	DiesWithProcess bool
	// Schema is the JSON Schema of the arguments; default
	// {"type":"object","properties":{},"required":[]}. Arguments are a
	// JSON object, as model APIs require: a schema is itself an object,
	// and its "type", when it has one, is "object" (or a list of types
	// holding it).
	Schema json.RawMessage
	// OutputSchema, when set, is the JSON Schema of successful results,
	// mirrored in the DESCRIPTION (not enforced).
	OutputSchema json.RawMessage
	// Handler runs calls; default: answer {}.
	Handler HandlerFunc
	// Timeout bounds one call; zero means DefaultTimeout and NoTimeout (or
	// any negative value) disables it. On timeout the handler's context is
	// cancelled and the call is answered "Tool <name> timed out after <ms>ms";
	// a result the handler returns later is discarded.
	Timeout time.Duration
	// Sync runs the handler in the turn of whoever runs the call instead
	// of on its own goroutine (the default): the tool actor's turn when the
	// tool duplex is called directly, and the dispatcher's own turn when a
	// router, installer or loop runs it (no actor hop: the seed's
	// synchronous router). Use it only for cheap handlers that never block:
	// a sync handler delays every other message of whoever runs it, and its
	// timeout can only be noticed when it returns (its context carries the
	// deadline; a late result is replaced by the timeout error). A panic in
	// a sync handler run by a dispatcher is answered as "panicked" and
	// counts for the circuit breaker; there is no actor to restart.
	Sync bool

	// defaultCaps: the tool declared no capabilities; Capabilities hold
	// the default it was given.
	defaultCaps bool
	// shownDefault is the first element of the Capabilities that
	// [Tool.Definition] returned showing that default: while they are the
	// same slice, still ["read"], they are not a declaration (a
	// Capabilities set on the Definition, ["read"] too, is one).
	shownDefault *string
}

// Tool is a validated, immutable [Definition] with its schema compiled. It
// is safe for concurrent use; the zero Tool is not usable (use [New]).
type Tool struct {
	def       Definition
	validator *validator
	describe  json.RawMessage
	// encode, when set, encodes a result of the handler as encodeResult
	// would, or declines (a typed tool's flat encoder).
	encode func(v any) (json.RawMessage, bool)
}

// ErrInvalidDefinition is wrapped by the errors [New] returns for a
// definition that cannot make a tool (a schema that does not compile, for
// example).
var ErrInvalidDefinition = errors.New("invalid tool definition")

// New validates def, applies its defaults and compiles its schema.
func New(def Definition) (*Tool, error) {
	// A tool rebuilt from the Definition of one without declared
	// capabilities, which shows the default, declares none either,
	// unless its Capabilities were set.
	def.defaultCaps = len(def.Capabilities) == 0 ||
		def.shownDefault != nil && len(def.Capabilities) == 1 && &def.Capabilities[0] == def.shownDefault &&
			def.Capabilities[0] == DefaultCapability
	def.shownDefault = nil
	def.Capabilities = slices.Clone(def.Capabilities)
	if def.Name == "" {
		def.Name = DefaultName
	}
	if def.Description == "" {
		def.Description = fmt.Sprintf(descriptionPattern, def.Name)
	}
	if len(def.Capabilities) == 0 {
		def.Capabilities = []string{DefaultCapability}
	}
	if len(def.Schema) == 0 {
		def.Schema = json.RawMessage(defaultSchemaJSON)
	}
	if def.Handler == nil {
		def.Handler = func(context.Context, json.RawMessage) (any, error) { return nil, nil }
	}
	switch {
	case def.Timeout == 0:
		def.Timeout = DefaultTimeout
	case def.Timeout < 0:
		def.Timeout = NoTimeout
	}
	if !validName(def.Name) {
		return nil, fmt.Errorf("%w %q: a name is 1 to 64 letters, digits, '_' or '-'", ErrInvalidDefinition, def.Name)
	}
	v, err := compileSchema(def.Name, def.Schema)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %w", ErrInvalidDefinition, def.Name, err)
	}
	if err := objectSchema(def.Schema); err != nil {
		return nil, fmt.Errorf("%w %q: %w", ErrInvalidDefinition, def.Name, err)
	}
	if len(def.OutputSchema) > 0 && !json.Valid(def.OutputSchema) {
		return nil, fmt.Errorf("%w %q: output schema is not JSON", ErrInvalidDefinition, def.Name)
	}
	t := &Tool{def: def, validator: v}
	if t.describe, err = json.Marshal(t.Description()); err != nil {
		return nil, fmt.Errorf("%w %q: encode description: %w", ErrInvalidDefinition, def.Name, err)
	}
	return t, nil
}

// validName reports whether name is a tool name model APIs accept (and a
// valid actor name).
func validName(name string) bool {
	if len(name) > 64 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// onCall returns a copy of t whose handler runs between the two calls
// of hook (see [RouterOptions].OnCall): the stage that owns the copy runs
// it as it would t.
func (t *Tool) onCall(hook func(ctx context.Context, ended bool)) *Tool {
	c := *t
	handler := t.def.Handler
	c.def.Handler = func(ctx context.Context, args json.RawMessage) (any, error) {
		hook(ctx, false)
		defer hook(ctx, true)
		return handler(ctx, args)
	}
	return &c
}

// MustNew is [New] for definitions known to be valid; it panics on error.
func MustNew(def Definition) *Tool {
	t, err := New(def)
	if err != nil {
		panic(err)
	}
	return t
}

// Name is the tool's name ("" for a nil Tool).
func (t *Tool) Name() string {
	if t == nil {
		return ""
	}
	return t.def.Name
}

// Definition returns a copy of the tool's definition with defaults
// applied. The Capabilities of a tool that declared none show the default
// ["read"]; passed to [New] unchanged they are still not declared (see
// [Definition].Capabilities).
func (t *Tool) Definition() Definition {
	d := t.def
	d.Capabilities = slices.Clone(d.Capabilities)
	if d.defaultCaps {
		d.shownDefault = &d.Capabilities[0]
	}
	return d
}

// Description is the JSON payload of a tool's DESCRIPTION frame.
type Description struct {
	Name          string          `json:"name"`
	Description   string          `json:"description"`
	Schema        json.RawMessage `json:"schema"`
	OutputSchema  json.RawMessage `json:"outputSchema,omitempty"`
	Capabilities  []string        `json:"capabilities"`
	Transactional bool            `json:"transactional"`
	Reversible    bool            `json:"reversible"`
	Idempotent    bool            `json:"idempotent"`
	Sync          bool            `json:"sync"`
	// TimeoutMs is the call timeout in milliseconds; 0 means none.
	TimeoutMs int64 `json:"timeoutMs"`

	// undeclared: Capabilities are the default of a tool that declared
	// none. Not part of the DESCRIBE payload, which the seed specifies.
	undeclared bool
}

// CapabilitiesDeclared reports whether the tool's author declared its
// capabilities. It is false only for the Description of a [Tool] made
// without Capabilities, whose Capabilities show the default ["read"]. A
// Description decoded from a DESCRIBE payload or written by hand counts
// as declared: it states its capabilities, and the payload has no room
// to say they were a default (the seed's format is kept as it is). A
// remote node's tool keeps its word: package remote sends it beside the
// payload and makes the host's tool without Capabilities when they were
// not declared.
func (d Description) CapabilitiesDeclared() bool { return !d.undeclared }

// ReadOnly reports whether the tool only reads: its capabilities are
// declared ([Description.CapabilitiesDeclared]) and "read" is the only
// one. A tool whose author declared none is not read-only, though it is
// described with the default ["read"]: it may do anything. Approval
// policies, MCP annotations and agents given as tools all go by it.
func (d Description) ReadOnly() bool {
	return !d.undeclared && len(d.Capabilities) > 0 &&
		!slices.ContainsFunc(d.Capabilities, func(c string) bool { return c != DefaultCapability })
}

// Description returns what the tool answers to DESCRIBE.
func (t *Tool) Description() Description {
	d := Description{
		Name:          t.def.Name,
		Description:   t.def.Description,
		Schema:        t.def.Schema,
		OutputSchema:  t.def.OutputSchema,
		Capabilities:  slices.Clone(t.def.Capabilities),
		Transactional: t.def.Transactional,
		Reversible:    !t.def.Irreversible,
		Idempotent:    t.def.Idempotent,
		Sync:          t.def.Sync,
		undeclared:    t.def.defaultCaps,
	}
	if t.def.Timeout > 0 {
		d.TimeoutMs = t.def.Timeout.Milliseconds()
	}
	return d
}

// Function is the tool in the OpenAI chat "tools" format:
// {"type":"function","function":{"name","description","parameters"}}.
func (t *Tool) Function() json.RawMessage {
	b, _ := json.Marshal(openAITool{Type: "function", Function: openAIFunction{
		Name: t.def.Name, Description: t.def.Description, Parameters: t.def.Schema,
	}}) // strings and already valid JSON always encode
	return b
}

type openAITool struct {
	Type     string         `json:"type"`
	Function openAIFunction `json:"function"`
}

type openAIFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// FunctionList encodes tools as the OpenAI chat "tools" request parameter:
// a JSON array of [Tool.Function] values.
func FunctionList(tools []*Tool) json.RawMessage {
	list := make([]json.RawMessage, len(tools))
	for i, t := range tools {
		list[i] = t.Function()
	}
	b, _ := json.Marshal(list) // valid raw messages always encode
	return b
}

// FromHandlers makes a tool for each handler of a name → handler map, as
// the seed's routers take them, with default definitions (sorted by name).
// sync sets Definition.Sync for all of them.
func FromHandlers(handlers map[string]HandlerFunc, sync bool) ([]*Tool, error) {
	names := make([]string, 0, len(handlers))
	for name := range handlers {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]*Tool, 0, len(names))
	for _, name := range names {
		t, err := New(Definition{Name: name, Handler: handlers[name], Sync: sync})
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// objectSchema returns an error when schema, compiled already, does not
// describe a JSON object: a boolean schema, or a "type" without
// "object".
func objectSchema(schema json.RawMessage) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(schema, &top); err != nil {
		return fmt.Errorf("the schema is %s, not an object: arguments are a JSON object, so is their schema", bytes.TrimSpace(schema))
	}
	raw, ok := top["type"]
	if !ok {
		return nil
	}
	var one string
	var list []string
	switch {
	case json.Unmarshal(raw, &one) == nil && one == "object":
		return nil
	case json.Unmarshal(raw, &list) == nil && slices.Contains(list, "object"):
		return nil
	}
	return fmt.Errorf("the schema's type is %s: arguments are a JSON object, so the schema's type is \"object\"", raw)
}
