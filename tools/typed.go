package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"unsafe"

	"github.com/google/jsonschema-go/jsonschema"
)

// TypedFunc is a tool implementation over Go types: In is decoded from the
// call's arguments, Out is encoded as its result.
type TypedFunc[In, Out any] func(ctx context.Context, in In) (Out, error)

// NewTyped makes a tool from a typed function. def gives the name,
// description and the rest of the definition; def.Handler must be nil.
// When def.Schema is empty it is inferred from In with
// jsonschema.For[In] (struct fields by their json tags, required unless
// omitempty/omitzero, no additional properties; a number field bounded by
// what its Go type holds, the bounds written exactly: int64's maximum is
// 9223372036854775807), and def.OutputSchema from
// Out when it can be; an In whose schema is not that of an object (a
// string, a number, a slice) is refused, as arguments are a JSON object.
// Arguments are validated against the schema before they are decoded
// into In, so fn only sees valid input. They are decoded as
// encoding/json decodes them (a flat struct of strings, booleans and
// numbers is read without it when that gives the same value), except
// that an integral number written with a fraction or an exponent (2.0,
// 2e0), which the schema's "integer" accepts, is read into an integer
// field as that integer. Valid arguments that In cannot hold (a number
// out of the range of its field, under a schema given in def.Schema) are
// answered as invalid arguments ([ArgumentsError],
// [FailureInvalidArguments]), as those the schema refuses are; fn does
// not run.
func NewTyped[In, Out any](def Definition, fn TypedFunc[In, Out]) (*Tool, error) {
	if def.Handler != nil {
		return nil, fmt.Errorf("%w %q: a typed tool takes no Handler", ErrInvalidDefinition, def.Name)
	}
	if fn == nil {
		return nil, fmt.Errorf("%w %q: nil function", ErrInvalidDefinition, def.Name)
	}
	if len(def.Schema) == 0 {
		s, err := inferSchema(reflect.TypeFor[In]())
		if err != nil {
			return nil, fmt.Errorf("%w %q: infer input schema: %w", ErrInvalidDefinition, def.Name, err)
		}
		def.Schema = s
		if objectSchema(def.Schema) != nil {
			return nil, fmt.Errorf("%w %q: input type %s is not a struct: arguments are a JSON object (use a struct, or give Definition.Schema)",
				ErrInvalidDefinition, def.Name, reflect.TypeFor[In]())
		}
	}
	if len(def.OutputSchema) == 0 {
		if s, err := jsonschema.For[Out](nil); err == nil {
			def.OutputSchema, _ = json.Marshal(s) // a schema inferred from a type always encodes
		}
	}
	flatIn, flatOut := newFlatDecoder(reflect.TypeFor[In]()), newFlatEncoder(reflect.TypeFor[Out]())
	def.Handler = func(ctx context.Context, args json.RawMessage) (any, error) {
		var in In // on the stack: the flat decoder keeps no pointer to it
		if flatIn == nil || !flatIn.decode(args, unsafe.Pointer(&in)) {
			decoded, err := decodeArguments[In](def.Name, args) // not what the flat decoder set before it declined
			if err != nil {
				return nil, err
			}
			in = *decoded
		}
		return fn(ctx, in)
	}
	t, err := New(def)
	if err != nil || flatOut == nil {
		return t, err
	}
	t.encode = func(v any) (json.RawMessage, bool) {
		out, ok := v.(Out)
		if !ok {
			return nil, false
		}
		return flatOut.encode(unsafe.Pointer(&out))
	}
	return t, nil
}

// MustNewTyped is [NewTyped] for definitions known to be valid; it panics
// on error.
func MustNewTyped[In, Out any](def Definition, fn TypedFunc[In, Out]) *Tool {
	t, err := NewTyped(def, fn)
	if err != nil {
		panic(err)
	}
	return t
}
