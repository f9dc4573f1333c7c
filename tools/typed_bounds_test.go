package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
)

// count is a named integer type: its schema is bounded as int64's.
type count int64

// boundsIn has a field of each integer kind whose inferred schema had no
// bounds, and float32; none is required.
type boundsIn struct {
	I   int      `json:"i,omitempty"`
	I32 int32    `json:"i32,omitempty"`
	I64 int64    `json:"i64,omitempty"`
	U   uint     `json:"u,omitempty"`
	U64 uint64   `json:"u64,omitempty"`
	UP  uintptr  `json:"up,omitempty"`
	F32 float32  `json:"f32,omitempty"`
	P   *int64   `json:"p,omitempty"`
	L   []uint64 `json:"l,omitempty"`
	C   count    `json:"c,omitempty"`
}

// TestTyped_SchemaBoundsTheIntegerKinds: the schema inferred for a typed
// tool's input bounds every integer field by its Go type's range, and a
// float32 field by the numbers float32 reads as finite, exactly: the
// schema says the bounds as integers, the validator accepts the numbers
// at them, which reach the function as the values they are, and refuses
// the numbers just past them as invalid arguments naming the field.
func TestTyped_SchemaBoundsTheIntegerKinds(t *testing.T) {
	tool := MustNewTyped(Definition{Name: "t"}, func(_ context.Context, in boundsIn) (boundsIn, error) { return in, nil })
	maxInt, minInt := strconv.Itoa(math.MaxInt), strconv.Itoa(math.MinInt)
	pastInt := strconv.FormatUint(uint64(math.MaxInt)+1, 10)
	maxUint := strconv.FormatUint(math.MaxUint, 10)
	const (
		maxI64  = "9223372036854775807"
		minI64  = "-9223372036854775808"
		pastI64 = "9223372036854775808"
		underI  = "-9223372036854775809"
		maxU64  = "18446744073709551615"
		pastU64 = "18446744073709551616"
		maxF32  = "340282346638528859811704183484516925440" // float32's largest, exactly
		overF32 = "340282356779733661637539395458142568448" // halfway to 2^128: read as infinity
		underO  = "340282356779733661637539395458142568447"
	)
	type edge struct {
		field, lit string
		want       any // the field's value; nil: refused
	}
	edges := []edge{
		{"i", maxInt, math.MaxInt}, {"i", minInt, math.MinInt},
		{"i32", "2147483647", int32(math.MaxInt32)}, {"i32", "-2147483648", int32(math.MinInt32)},
		{"i32", "2147483648", nil}, {"i32", "-2147483649", nil},
		{"i64", maxI64, int64(math.MaxInt64)}, {"i64", minI64, int64(math.MinInt64)},
		{"i64", "9.223372036854775807e18", int64(math.MaxInt64)},
		{"i64", pastI64, nil}, {"i64", underI, nil}, {"i64", "9.223372036854775808e18", nil}, {"i64", "1e19", nil},
		{"u", maxUint, uint(math.MaxUint)}, {"u", "0", uint(0)}, {"u", "-1", nil},
		{"u64", maxU64, uint64(math.MaxUint64)}, {"u64", "0", uint64(0)},
		{"u64", pastU64, nil}, {"u64", "1.8446744073709551616e19", nil}, {"u64", "-1", nil},
		{"up", "0", uintptr(0)}, {"up", "-1", nil},
		{"f32", maxF32, float32(math.MaxFloat32)}, {"f32", "-" + maxF32, float32(-math.MaxFloat32)},
		{"f32", "3.4028234663852886e38", float32(math.MaxFloat32)}, {"f32", "3.4028235e38", float32(math.MaxFloat32)},
		{"f32", underO, float32(math.MaxFloat32)}, {"f32", "-" + underO, float32(-math.MaxFloat32)}, {"f32", "1.5", float32(1.5)},
		{"f32", overF32, nil}, {"f32", "-" + overF32, nil}, {"f32", "3.4028236e38", nil}, {"f32", "-3.4028236e38", nil}, {"f32", "1e39", nil},
		{"p", maxI64, int64(math.MaxInt64)}, {"p", pastI64, nil},
		{"l", maxU64, uint64(math.MaxUint64)}, {"l", pastU64, nil},
		{"c", maxI64, count(math.MaxInt64)}, {"c", pastI64, nil},
	}
	if math.MaxInt == math.MaxInt64 {
		edges = append(edges, edge{"i", pastInt, nil}, edge{"i", underI, nil}, edge{"u", pastU64, nil})
	} else {
		edges = append(edges, edge{"i", pastInt, nil}, edge{"i", "-2147483649", nil}, edge{"u", "4294967296", nil})
	}
	for _, want := range []string{`"i64":{"type":"integer","minimum":-9223372036854775808,"maximum":9223372036854775807}`,
		`"u64":{"type":"integer","minimum":0,"maximum":18446744073709551615}`,
		`"f32":{"type":"number","exclusiveMinimum":-340282356779733661637539395458142568448,"exclusiveMaximum":340282356779733661637539395458142568448}`} {
		if !strings.Contains(string(tool.def.Schema), want) {
			t.Errorf("the schema %s does not say %s", tool.def.Schema, want)
		}
	}
	if tool.validator.quick == nil {
		t.Errorf("the bounded schema %s has no quick path", tool.def.Schema)
	}
	for _, e := range edges {
		doc := fmt.Sprintf(`{%q:%s}`, e.field, e.lit)
		if e.field == "l" {
			doc = fmt.Sprintf(`{"l":[1,%s]}`, e.lit)
		}
		_, err := tool.validator.validate(json.RawMessage(doc))
		if e.want == nil {
			var ae *ArgumentsError
			if !errors.As(err, &ae) || !strings.HasPrefix(strings.Join(ae.Problems, "; "), "/"+e.field) {
				t.Errorf("%s: validation answered %v; want invalid arguments naming /%s", doc, err, e.field)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: refused: %v", doc, err)
			continue
		}
		out, err := tool.def.Handler(context.Background(), json.RawMessage(doc))
		if err != nil {
			t.Errorf("%s: answered %v", doc, err)
			continue
		}
		in := out.(boundsIn)
		got := map[string]any{"i": in.I, "i32": in.I32, "i64": in.I64, "u": in.U, "u64": in.U64, "up": in.UP, "f32": in.F32, "c": in.C}
		if in.P != nil {
			got["p"] = *in.P
		}
		if len(in.L) == 2 {
			got["l"] = in.L[1]
		}
		if got[e.field] != e.want {
			t.Errorf("%s: %s is %v, want %v", doc, e.field, got[e.field], e.want)
		}
	}
}

// TestValidate_BoundProblemSaysTheExactBound: a number past a bound that a
// float64 does not hold is refused with the bound as the schema writes it
// (9223372036854775807), not rounded (9.223372036854776e+18), whether
// the schema was inferred or written, through a $ref too.
func TestValidate_BoundProblemSaysTheExactBound(t *testing.T) {
	typed := MustNewTyped(Definition{Name: "t"}, func(_ context.Context, in boundsIn) (boundsIn, error) { return in, nil })
	written, err := compileSchema("w", json.RawMessage(`{"type":"object","properties":{
		"r":{"$ref":"#/$defs/big"},
		"e":{"type":"number","exclusiveMaximum":12345678901234567890123},
		"a/b %~c":{"type":"integer","minimum":-9007199254740993}},
		"$defs":{"big":{"type":"integer","maximum":9007199254740993}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		v         *validator
		doc, want string
	}{
		{typed.validator, `{"i64":9223372036854775808}`, "/i64: must be <= 9223372036854775807 but found 9223372036854775808"},
		{typed.validator, `{"i64":-9223372036854775809}`, "/i64: must be >= -9223372036854775808 but found -9223372036854775809"},
		{typed.validator, `{"u64":18446744073709551616}`, "/u64: must be <= 18446744073709551615 but found 18446744073709551616"},
		{typed.validator, `{"l":[1,18446744073709551616]}`, "/l/1: must be <= 18446744073709551615 but found 18446744073709551616"},
		{typed.validator, `{"f32":1e39}`, "/f32: must be < 340282356779733661637539395458142568448 but found 1e39"},
		{written, `{"r":9007199254740994}`, "/r: must be <= 9007199254740993 but found 9007199254740994"},
		{written, `{"a/b %~c":-9007199254740994}`, "/a~1b%20%25~0c: must be >= -9007199254740993 but found -9007199254740994"},
		{written, `{"e":12345678901234567890123}`, "/e: must be < 12345678901234567890123 but found 12345678901234567890123"},
	} {
		_, err := c.v.validate(json.RawMessage(c.doc))
		var ae *ArgumentsError
		if !errors.As(err, &ae) || len(ae.Problems) != 1 || ae.Problems[0] != c.want {
			t.Errorf("%s: validation answered %v; want the problem %q", c.doc, err, c.want)
		}
	}
}
