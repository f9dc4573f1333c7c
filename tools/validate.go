package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"unsafe"

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
	// source is the schema as given (a copy), read only to word a
	// problem: a bound as the schema writes it.
	source []byte
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
	return &validator{tool: tool, schema: s, emptyOK: s.Validate(map[string]any{}) == nil, quick: compileQuick(schema),
		source: bytes.Clone(schema)}, nil
}

// ArgumentsError is the error of a call whose arguments are not valid JSON
// or do not match the tool's schema. The tool does not run; the model reads
// Error() in the call's error result, of kind FailureInvalidArguments. A
// handler returns one for arguments valid for the schema that it cannot
// take: a typed tool ([NewTyped]) for those its input type cannot hold.
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
	if v.quick != nil && json.Valid(args) && v.quick.accepts(args) {
		return args, nil
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
	if err := v.schema.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return nil, &ArgumentsError{Tool: v.tool, Problems: []string{err.Error()}}
		}
		return nil, &ArgumentsError{Tool: v.tool, Problems: v.leafProblems(ve, nil)}
	}
	return args, nil
}

// validationPanic is a panic raised while a call's arguments were
// validated: a fault of the validator, not of the arguments. check
// returns it as its error, with the stack it was raised on for the log
// (logPanic) of whoever answers the call.
type validationPanic struct {
	value any
	stack []byte
}

func (p *validationPanic) Error() string { return fmt.Sprintf("validation panicked: %v", p.value) }

// check is validate for a call answered in the caller's turn: a panic
// while validating is returned as a *validationPanic, so that it is that
// call's answer rather than the failure of the actor validating it (and
// of every other call that actor runs).
func (v *validator) check(args json.RawMessage) (out json.RawMessage, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, &validationPanic{value: r, stack: debug.Stack()}
		}
	}()
	return v.validate(args)
}

func jsonProblem(err error) string {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "unexpected end of JSON input (truncated arguments)"
	}
	return err.Error()
}

// leafProblems lists the innermost causes of a validation error, each
// naming the place in the arguments it is about.
func (v *validator) leafProblems(ve *jsonschema.ValidationError, out []string) []string {
	if len(ve.Causes) == 0 {
		loc := ve.InstanceLocation
		if loc == "" {
			loc = "/"
		}
		msg := strings.Replace(ve.Message, ", but got ", ", got ", 1)
		return append(out, loc+": "+v.exactBound(ve.AbsoluteKeywordLocation, msg))
	}
	for _, c := range ve.Causes {
		out = v.leafProblems(c, out)
	}
	return out
}

// boundWords are the openings of the validator's messages for the
// numeric bounds, by keyword; each goes on "<bound> but found <number>".
var boundWords = map[string]string{"minimum": "must be >= ", "exclusiveMinimum": "must be > ",
	"maximum": "must be <= ", "exclusiveMaximum": "must be < "}

// exactBound returns msg, the message of a failed keyword at keywordAt (an
// absolute keyword location, "<url>#<json pointer>"), with a numeric bound
// as the schema writes it: the validator prints it as a float64, rounded
// (9.223372036854776e+18 for int64's maximum, 9223372036854775807), which
// can even read as within the bound a number past it. msg is returned as
// it is when it is not a bound's or the bound cannot be found.
func (v *validator) exactBound(keywordAt, msg string) string {
	_, pointer, ok := strings.Cut(keywordAt, "#")
	if !ok {
		return msg
	}
	words, ok := boundWords[pointer[strings.LastIndexByte(pointer, '/')+1:]]
	if !ok || !strings.HasPrefix(msg, words) {
		return msg
	}
	_, found, ok := strings.Cut(msg[len(words):], " but found ")
	if !ok {
		return msg
	}
	dec := json.NewDecoder(bytes.NewReader(v.source))
	dec.UseNumber()
	var node any
	if dec.Decode(&node) != nil {
		return msg
	}
	for _, token := range strings.Split(pointer, "/")[1:] {
		token, err := url.PathUnescape(token) // the validator escapes a token as a URL's fragment, too
		if err != nil {
			return msg
		}
		token = strings.ReplaceAll(strings.ReplaceAll(token, "~1", "/"), "~0", "~")
		switch n := node.(type) {
		case map[string]any:
			node = n[token]
		case []any:
			i, err := strconv.Atoi(token)
			if err != nil || i < 0 || i >= len(n) {
				return msg
			}
			node = n[i]
		default:
			return msg
		}
	}
	bound, ok := node.(json.Number)
	if !ok {
		return msg
	}
	return words + string(bound) + " but found " + found
}

// quickSchema is a compiled JSON Schema made only of the keywords tool
// schemas mostly use — type, properties, required, additionalProperties,
// items, the numeric bounds and annotations — which is what schemas
// inferred from Go types (NewTyped) are made of. It answers "certainly valid" or "let the general
// validator decide": whatever it accepts, the general validator accepts
// too. It is immutable.
type quickSchema struct {
	types       uint8 // bits of jsonKind; 0 means any
	properties  map[string]*quickSchema
	required    []string
	noAdditions bool         // additionalProperties: false
	additional  *quickSchema // additionalProperties as a schema
	items       *quickSchema
	// bounded: a number is certainly within the schema's bounds when it
	// reads (rounded to a float64) as strictly between lo and hi, its
	// lower and upper bounds rounded to float64 (rounding keeps the order:
	// a number at or below a bound reads as at most the bound's float64);
	// or, read exactly (a plain integer of at most 15 digits), as lo when
	// loIn (lo is an inclusive bound, exactly) or as hi when hiIn.
	bounded    bool
	lo, hi     float64
	loIn, hiIn bool
	// wide: the bounds hold every integer of at most 15 digits (int64's,
	// say), which then need not be read.
	wide bool
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
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber() // bounds as written, not rounded
	var doc any
	if err := dec.Decode(&doc); err != nil {
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
		case k == "minimum" || k == "exclusiveMinimum" || k == "maximum" || k == "exclusiveMaximum":
			if !q.setBound(k, v) {
				return nil, false
			}
		default:
			return nil, false
		}
	}
	q.wide = q.bounded && q.lo < -1e15 && q.hi > 1e15
	return q, true
}

// setBound narrows q's bounds by the bound keyword k of value v.
func (q *quickSchema) setBound(k string, v any) bool {
	n, ok := v.(json.Number)
	if !ok {
		return false // a draft-4 boolean exclusiveMaximum, say
	}
	r, ok := new(big.Rat).SetString(string(n))
	if !ok {
		return false
	}
	if !q.bounded {
		q.bounded, q.lo, q.hi = true, math.Inf(-1), math.Inf(1)
	}
	f, exact := r.Float64() // the nearest, ±Inf beyond float64
	if k == "minimum" || k == "exclusiveMinimum" {
		in := exact && k == "minimum"
		switch {
		case f > q.lo:
			q.lo, q.loIn = f, in
		case f == q.lo:
			q.loIn = q.loIn && in
		}
	} else {
		in := exact && k == "maximum"
		switch {
		case f < q.hi:
			q.hi, q.hiIn = f, in
		case f == q.hi:
			q.hiIn = q.hiIn && in
		}
	}
	return true
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

// accepts reports whether args, valid JSON, are certainly valid. It reads
// them in place: nothing is decoded or allocated.
func (q *quickSchema) accepts(args []byte) bool {
	end, ok := q.value(args, skipSpace(args, 0))
	return ok && skipSpace(args, end) == len(args)
}

// value checks the value at b[i:] (valid JSON; q nil accepts anything)
// and returns the index after it.
func (q *quickSchema) value(b []byte, i int) (int, bool) {
	var kind uint8
	switch c := b[i]; {
	case c == '{':
		kind = kindObject
	case c == '[':
		kind = kindArray
	case c == '"':
		kind = kindString
	case c == 't' || c == 'f':
		kind = kindBoolean
	case c == 'n':
		kind = kindNull
	default:
		kind = kindNumber
	}
	if q != nil && q.types != 0 && q.types&kind == 0 {
		if kind != kindNumber || q.types&kindInteger == 0 {
			return i, false
		}
		kind = kindInteger // only "integer" can match: certain for a plain integer literal; 1.0 or 1e3 are left to the validator
	}
	switch kind {
	case kindObject:
		return q.object(b, i)
	case kindArray:
		var items *quickSchema
		if q != nil {
			items = q.items
		}
		i = skipSpace(b, i+1)
		if b[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = items.value(b, i); !ok {
				return i, false
			}
			i = skipSpace(b, i)
			if b[i] == ']' {
				return i + 1, true
			}
			i = skipSpace(b, i+1) // the comma
		}
	case kindString:
		return stringEnd(b, i), true
	case kindBoolean, kindNull:
		for i < len(b) && b[i] >= 'a' && b[i] <= 'z' {
			i++
		}
		return i, true
	}
	start := i
	for i < len(b) && (b[i] == '-' || b[i] == '+' || b[i] == '.' || b[i] == 'e' || b[i] == 'E' || b[i] >= '0' && b[i] <= '9') {
		i++
	}
	if kind == kindInteger && bytes.ContainsAny(b[start:i], ".eE") {
		return i, false
	}
	if q != nil && q.bounded {
		digits := i - start
		if b[start] == '-' {
			digits--
		}
		if q.wide && kind == kindInteger && digits <= 15 { // a plain integer (checked above) the bounds hold
			return i, true
		}
		f, exact := literalFloat(b[start:i])
		if !(f > q.lo || exact && q.loIn && f == q.lo) || !(f < q.hi || exact && q.hiIn && f == q.hi) {
			return i, false
		}
	}
	return i, true
}

// literalFloat is the JSON number lit rounded to a float64 (±Inf beyond
// float64's range), and whether that is its exact value as a plain
// integer of at most 15 digits, without allocating.
func literalFloat(lit []byte) (float64, bool) {
	digits, neg := lit, false
	if len(digits) > 0 && digits[0] == '-' {
		digits, neg = digits[1:], true
	}
	if len(digits) > 0 && len(digits) <= 15 { // below 2^53: exact as an int64
		var n int64
		for _, c := range digits {
			if c < '0' || c > '9' {
				n = -1
				break
			}
			n = n*10 + int64(c-'0')
		}
		if n >= 0 {
			if neg {
				return -float64(n), true
			}
			return float64(n), true
		}
	}
	f, _ := strconv.ParseFloat(unsafe.String(unsafe.SliceData(lit), len(lit)), 64) // valid JSON: only a range error
	return f, false
}

// object checks the object at b[i:]: its required members, and each
// member against its property's schema, additionalProperties or nothing.
// A key with escapes, a schema requiring more than 64 names, or a
// duplicate key is left to the validator.
func (q *quickSchema) object(b []byte, i int) (int, bool) {
	if q != nil && len(q.required) > 64 {
		return i, false
	}
	var seen uint64 // bits of q.required
	i = skipSpace(b, i+1)
	for b[i] != '}' {
		end := stringEnd(b, i)
		key := b[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			return i, false
		}
		i = skipSpace(b, skipSpace(b, end)+1) // the colon
		var sub *quickSchema
		if q != nil {
			for r, name := range q.required {
				if name == string(key) {
					if seen&(1<<r) != 0 {
						return i, false
					}
					seen |= 1 << r
				}
			}
			var declared bool
			if sub, declared = q.properties[string(key)]; !declared {
				if q.noAdditions {
					return i, false
				}
				sub = q.additional
			}
		}
		var ok bool
		if i, ok = sub.value(b, i); !ok {
			return i, false
		}
		i = skipSpace(b, i)
		if b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	if q != nil && seen != 1<<len(q.required)-1 {
		return i, false
	}
	return i + 1, true
}

// stringEnd returns the index after the JSON string starting at b[i].
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// skipSpace returns the index of the first byte of b[i:] that is not JSON
// whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
