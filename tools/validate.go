package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// validator checks call arguments against a tool's compiled schema. It is
// immutable and safe for concurrent use.
type validator struct {
	tool   string
	schema *jsonschema.Schema
	// emptyOK says {} is valid: empty arguments and a bare {} (the usual
	// call of a tool without parameters) then need no decoding.
	emptyOK bool
	// quick, when the schema keeps to the keywords quickSchema knows,
	// accepts valid arguments without the general validator (which
	// allocates per keyword and per property); arguments it does not
	// accept are checked by the general validator, which also words the
	// errors.
	quick *quickSchema
}

// errNoRemoteSchemas refuses to load $ref targets: a tool's schema must be
// self-contained (and validation must never touch the network).
var errNoRemoteSchemas = errors.New("schemas may not reference other documents")

func compileSchema(tool string, schema json.RawMessage) (*validator, error) {
	c := jsonschema.NewCompiler()
	c.LoadURL = func(url string) (io.ReadCloser, error) {
		return nil, fmt.Errorf("load %s: %w", url, errNoRemoteSchemas)
	}
	const url = "polyweave://tool/schema.json"
	if err := c.AddResource(url, bytes.NewReader(schema)); err != nil {
		return nil, fmt.Errorf("read schema: %w", err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("compile schema: %w", err)
	}
	return &validator{tool: tool, schema: s, emptyOK: s.Validate(map[string]any{}) == nil, quick: compileQuick(schema)}, nil
}

// ArgumentsError is the error of a call whose arguments are not valid JSON
// or do not match the tool's schema. The tool does not run; the model reads
// Error() in the call's error result.
type ArgumentsError struct {
	Tool string
	// Problems are "<json pointer>: <what is wrong>" lines, or one
	// "invalid JSON: ..." line.
	Problems []string
}

func (e *ArgumentsError) Error() string {
	return fmt.Sprintf("invalid arguments for tool %q: %s", e.Tool, strings.Join(e.Problems, "; "))
}

// validate returns the arguments to pass to the handler: "" (or only
// whitespace) becomes {}.
func (v *validator) validate(args json.RawMessage) (json.RawMessage, error) {
	if t := bytes.TrimSpace(args); len(t) == 0 || string(t) == "{}" {
		args = json.RawMessage("{}")
		if v.emptyOK {
			return args, nil
		}
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, &ArgumentsError{Tool: v.tool, Problems: []string{"invalid JSON: " + jsonProblem(err)}}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &ArgumentsError{Tool: v.tool, Problems: []string{"invalid JSON: data after the top-level value"}}
	}
	if v.quick != nil && v.quick.accepts(doc) {
		return args, nil
	}
	if err := v.schema.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return nil, &ArgumentsError{Tool: v.tool, Problems: []string{err.Error()}}
		}
		return nil, &ArgumentsError{Tool: v.tool, Problems: leafProblems(ve, nil)}
	}
	return args, nil
}

func jsonProblem(err error) string {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "unexpected end of JSON input (truncated arguments)"
	}
	return err.Error()
}

// leafProblems lists the innermost causes of a validation error, each
// naming the place in the arguments it is about.
func leafProblems(ve *jsonschema.ValidationError, out []string) []string {
	if len(ve.Causes) == 0 {
		loc := ve.InstanceLocation
		if loc == "" {
			loc = "/"
		}
		return append(out, loc+": "+strings.Replace(ve.Message, ", but got ", ", got ", 1))
	}
	for _, c := range ve.Causes {
		out = leafProblems(c, out)
	}
	return out
}

// quickSchema is a compiled JSON Schema made only of the keywords tool
// schemas mostly use — type, properties, required, additionalProperties,
// items and annotations — which is what schemas inferred from Go types
// (NewTyped) are made of. It answers "certainly valid" or "let the general
// validator decide": whatever it accepts, the general validator accepts
// too. It is immutable.
type quickSchema struct {
	types       uint8 // bits of jsonKind; 0 means any
	properties  map[string]*quickSchema
	required    []string
	noAdditions bool         // additionalProperties: false
	additional  *quickSchema // additionalProperties as a schema
	items       *quickSchema
}

// JSON kinds as bits of quickSchema.types.
const (
	kindNull uint8 = 1 << iota
	kindBoolean
	kindObject
	kindArray
	kindNumber
	kindString
	kindInteger
)

var kindBits = map[string]uint8{"null": kindNull, "boolean": kindBoolean, "object": kindObject,
	"array": kindArray, "number": kindNumber, "string": kindString, "integer": kindInteger}

// annotations are keywords that never make a value invalid.
var annotations = map[string]bool{"$schema": true, "title": true, "description": true, "default": true,
	"examples": true, "$comment": true, "readOnly": true, "writeOnly": true, "deprecated": true}

// compileQuick returns the quick form of schema, or nil when it uses any
// keyword besides the ones quickSchema knows.
func compileQuick(schema json.RawMessage) *quickSchema {
	var doc any
	if err := json.Unmarshal(schema, &doc); err != nil {
		return nil
	}
	q, ok := quickFrom(doc)
	if !ok {
		return nil
	}
	return q
}

func quickFrom(doc any) (*quickSchema, bool) {
	if b, ok := doc.(bool); ok {
		return &quickSchema{}, b // true accepts anything; false: leave it to the validator
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, false
	}
	q := &quickSchema{}
	for k, v := range m {
		switch {
		case annotations[k]:
		case k == "type":
			if !q.setTypes(v) {
				return nil, false
			}
		case k == "properties":
			props, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			q.properties = make(map[string]*quickSchema, len(props))
			for name, sub := range props {
				if q.properties[name], ok = quickFrom(sub); !ok {
					return nil, false
				}
			}
		case k == "required":
			list, ok := v.([]any)
			if !ok {
				return nil, false
			}
			for _, r := range list {
				name, ok := r.(string)
				if !ok {
					return nil, false
				}
				q.required = append(q.required, name)
			}
		case k == "additionalProperties":
			if b, isBool := v.(bool); isBool {
				q.noAdditions = !b
				continue
			}
			if q.additional, ok = quickFrom(v); !ok {
				return nil, false
			}
		case k == "items":
			if q.items, ok = quickFrom(v); !ok { // the array (tuple) form is left to the validator
				return nil, false
			}
		default:
			return nil, false
		}
	}
	return q, true
}

func (q *quickSchema) setTypes(v any) bool {
	switch t := v.(type) {
	case string:
		q.types = kindBits[t]
		return q.types != 0
	case []any:
		for _, e := range t {
			name, ok := e.(string)
			if !ok || kindBits[name] == 0 {
				return false
			}
			q.types |= kindBits[name]
		}
		return q.types != 0
	}
	return false
}

// accepts reports whether doc (decoded with UseNumber) is certainly valid.
func (q *quickSchema) accepts(doc any) bool {
	if q.types != 0 && !q.typeOK(doc) {
		return false
	}
	switch v := doc.(type) {
	case map[string]any:
		for _, name := range q.required {
			if _, ok := v[name]; !ok {
				return false
			}
		}
		if q.properties == nil && !q.noAdditions && q.additional == nil {
			return true
		}
		for name, val := range v {
			if sub, ok := q.properties[name]; ok {
				if !sub.accepts(val) {
					return false
				}
				continue
			}
			if q.noAdditions || (q.additional != nil && !q.additional.accepts(val)) {
				return false
			}
		}
	case []any:
		if q.items != nil {
			for _, e := range v {
				if !q.items.accepts(e) {
					return false
				}
			}
		}
	}
	return true
}

func (q *quickSchema) typeOK(doc any) bool {
	var kind uint8
	switch v := doc.(type) {
	case nil:
		kind = kindNull
	case bool:
		kind = kindBoolean
	case map[string]any:
		kind = kindObject
	case []any:
		kind = kindArray
	case string:
		kind = kindString
	case json.Number:
		kind = kindNumber
		if q.types&kindNumber == 0 {
			// Only "integer" can match: certain for a plain integer
			// literal; 1.0 or 1e3 are left to the validator.
			return q.types&kindInteger != 0 && strings.IndexAny(string(v), ".eE") < 0
		}
	default:
		return false
	}
	return q.types&kind != 0
}
