package tools

import (
	"bytes"
	"encoding"
	"encoding/json"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
)

// inferSchema is the JSON Schema of t as jsonschema.For infers it, with
// every number field bounded by what its Go type holds: jsonschema-go
// bounds the integer kinds of 8 to 32 bits, and gives int, int64, uint,
// uint64 and uintptr (and float32) no bound, or only a minimum of 0, so
// that a number past their range passed validation. Their bounds are
// written exactly, as integers (9223372036854775807, not the float64
// 9.223372036854776e18 that jsonschema.Schema's fields would write,
// which is past the range): the validator compares numbers exactly.
// float32's are the numbers it reads as finite (see float32Overflow).
func inferSchema(t reflect.Type) (json.RawMessage, error) {
	schemas := map[reflect.Type]*jsonschema.Schema{}
	collectBounded(t, map[reflect.Type]bool{}, schemas)
	s, err := jsonschema.ForType(t, &jsonschema.ForOptions{TypeSchemas: schemas})
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	for _, sb := range sentinelBounds {
		b = bytes.ReplaceAll(b, []byte(sb.sentinel), []byte(sb.exact))
	}
	return b, nil
}

// float32Overflow is 2^128 - 2^103, halfway between float32's largest
// finite value and 2^128: a number below it is read as a finite float32
// (3.4028235e38, float32's largest as Go prints it, is above that largest
// value and is read as it), one at or above it overflows.
const float32Overflow = "340282356779733661637539395458142568448"

// A bound a float64 cannot hold is written as a sentinel float64 whose
// keyword-and-value is then replaced by the exact text. A string of the
// schema cannot hold the pattern: its quotes would be escaped.
var sentinelBounds = []struct {
	value           float64
	sentinel, exact string
}{
	{1e-300, `"minimum":1e-300`, `"minimum":-9223372036854775808`},
	{2e-300, `"maximum":2e-300`, `"maximum":9223372036854775807`},
	{3e-300, `"maximum":3e-300`, `"maximum":18446744073709551615`},
	{4e-300, `"exclusiveMinimum":4e-300`, `"exclusiveMinimum":-` + float32Overflow},
	{5e-300, `"exclusiveMaximum":5e-300`, `"exclusiveMaximum":` + float32Overflow},
}

var (
	unmarshaler     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// collectBounded adds to schemas the bounded schema of each number type
// reachable from t (through pointers, slices, arrays, maps and struct
// fields) that jsonschema-go leaves without bounds. A type that decodes
// itself (json.Unmarshaler, encoding.TextUnmarshaler) is left as it is.
func collectBounded(t reflect.Type, seen map[reflect.Type]bool, schemas map[reflect.Type]*jsonschema.Schema) {
	if seen[t] {
		return
	}
	seen[t] = true
	if t.Implements(unmarshaler) || t.Implements(textUnmarshaler) ||
		reflect.PointerTo(t).Implements(unmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return
	}
	bits := t.Size() * 8
	num := func(v float64) *float64 { return &v }
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		collectBounded(t.Elem(), seen, schemas)
	case reflect.Struct:
		for i := range t.NumField() {
			collectBounded(t.Field(i).Type, seen, schemas)
		}
	case reflect.Int, reflect.Int64:
		s := &jsonschema.Schema{Type: "integer", Minimum: num(sentinelBounds[0].value), Maximum: num(sentinelBounds[1].value)}
		if bits == 32 {
			s.Minimum, s.Maximum = num(-1<<31), num(1<<31-1) // float64 holds them
		}
		schemas[t] = s
	case reflect.Uint, reflect.Uint64, reflect.Uintptr:
		s := &jsonschema.Schema{Type: "integer", Minimum: num(0), Maximum: num(sentinelBounds[2].value)}
		if bits == 32 {
			s.Maximum = num(1<<32 - 1)
		}
		schemas[t] = s
	case reflect.Float32:
		schemas[t] = &jsonschema.Schema{Type: "number", ExclusiveMinimum: num(sentinelBounds[3].value), ExclusiveMaximum: num(sentinelBounds[4].value)}
	}
}
