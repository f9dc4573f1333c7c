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
	return &validator{tool: tool, schema: s, emptyOK: s.Validate(map[string]any{}) == nil}, nil
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
