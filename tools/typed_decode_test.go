package tools

import (
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/polyweave/polyweave-go/messages"
)

// flatIn has a field of every kind the flat decoder reads.
type flatIn struct {
	S    string  `json:"s"`
	Name string  `json:",omitempty"`
	B    bool    `json:"b"`
	I    int     `json:"i"`
	I8   int8    `json:"i8"`
	I16  int16   `json:"i16"`
	I32  int32   `json:"i32"`
	I64  int64   `json:"i64"`
	U    uint    `json:"u"`
	U8   uint8   `json:"u8"`
	U16  uint16  `json:"u16"`
	U32  uint32  `json:"u32"`
	U64  uint64  `json:"u64"`
	F32  float32 `json:"f32"`
	F64  float64 `json:"f64"`
	Mode mode    `json:"mode"`
	Skip string  `json:"-"`
}

type mode string

// flatDecodes decodes doc with the flat decoder; ok is false when it
// declined.
func flatDecodes(t testing.TB, doc string) (flatIn, bool) {
	t.Helper()
	d := newFlatDecoder(reflect.TypeFor[flatIn]())
	if d == nil {
		t.Fatal("flatIn is not decodable by the flat decoder")
	}
	var in flatIn
	ok := d.decode([]byte(doc), unsafe.Pointer(&in))
	return in, ok
}

// checkLikeEncodingJSON fails when the flat decoder accepts doc and
// encoding/json does not decode it to the same value.
func checkLikeEncodingJSON(t testing.TB, doc string) bool {
	t.Helper()
	got, ok := flatDecodes(t, doc)
	if !ok {
		return false
	}
	var want flatIn
	if err := json.Unmarshal([]byte(doc), &want); err != nil {
		t.Fatalf("flat decoder accepts %q, encoding/json fails: %v", doc, err)
	}
	if got != want {
		t.Fatalf("%q: flat decoder gives %+v, encoding/json %+v", doc, got, want)
	}
	return true
}

func TestFlatDecoder_DecodesAsEncodingJSON(t *testing.T) {
	accepted := []string{
		`{}`, ` { } `, `{"s":"a","i":1}`, "{\n\t\"s\" : \"héllo\" ,\r\n \"b\" : true }",
		`{"b":false,"b":true}`, `{"i":-0}`, `{"i8":-128,"i16":32767,"i32":-2147483648,"i64":9223372036854775807}`,
		`{"u":0,"u8":255,"u16":65535,"u32":4294967295,"u64":18446744073709551615}`,
		`{"f32":1.5,"f64":-2.5e-3}`, `{"f64":1E2,"f32":0}`, `{"f64":12}`, `{"Name":"x","mode":"fast"}`,
		`{"s":""}`, `{"s":"日本"}`,
	}
	for _, doc := range accepted {
		if !checkLikeEncodingJSON(t, doc) {
			t.Errorf("flat decoder declines %q", doc)
		}
	}
	declined := []string{
		``, ` `, `null`, `[]`, `{`, `{"s":"a"`, `{"s":"a",}`, `{"s":"a"}x`, `{"s":"a"} {}`,
		`{"s":"a\"b"}`, `{"s":"\u0061"}`, "{\"s\":\"a\x01\"}", "{\"s\":\"\xff\"}", `{"s":null}`, `{"s":1}`,
		`{"S":"a"}`, `{"name":"x"}`, `{"Skip":"x"}`, `{"-":"x"}`, `{"other":1}`, `{"i":1.0}`, `{"i":1e2}`,
		`{"i":01}`, `{"i":+1}`, `{"i":"1"}`, `{"i":-}`, `{"i8":128}`, `{"u":-1}`, `{"u":-0}`,
		`{"u64":18446744073709551616}`, `{"f32":1e39}`, `{"f64":1.}`, `{"f64":.5}`, `{"f64":1e}`,
		`{"b":tru}`, `{"b":"true"}`, `{"b":1}`, `{"s":{"a":1}}`, `{"s":["a"]}`, `{"i":1 "s":"a"}`,
		`{"i" 1}`, `{'s':'a'}`, `{"s\u0000":1}`,
	}
	for _, doc := range declined {
		if checkLikeEncodingJSON(t, doc) {
			t.Errorf("flat decoder accepts %q", doc)
		}
	}
}

func TestFlatDecoder_TypesLeftToEncodingJSON(t *testing.T) {
	type embedded struct{ A int }
	type withEmbedded struct {
		embedded
		B int
	}
	type withStringOpt struct {
		N int `json:"n,string"`
	}
	type withNested struct{ M map[string]int }
	type withPointer struct{ P *int }
	type withSlice struct{ L []string }
	type withDash struct {
		A int `json:"a-b"`
	}
	type withClash struct {
		A int `json:"B"`
		B int
	}
	type withUnexported struct{ a int }
	type withNumber struct{ T json.Number } // a string kind encoding/json checks as a number
	type withMode struct{ M mode }
	for _, c := range []struct {
		name string
		t    reflect.Type
		flat bool
	}{
		{"embedded", reflect.TypeFor[withEmbedded](), false},
		{"string option", reflect.TypeFor[withStringOpt](), false},
		{"map field", reflect.TypeFor[withNested](), false},
		{"pointer field", reflect.TypeFor[withPointer](), false},
		{"slice field", reflect.TypeFor[withSlice](), false},
		{"tag with a dash", reflect.TypeFor[withDash](), false},
		{"two fields of one name", reflect.TypeFor[withClash](), false},
		{"unexported field", reflect.TypeFor[withUnexported](), false},
		{"custom unmarshaler", reflect.TypeFor[json.RawMessage](), false},
		{"not a struct", reflect.TypeFor[map[string]any](), false},
		{"pointer to struct", reflect.TypeFor[*flatIn](), false},
		{"json.Number", reflect.TypeFor[withNumber](), false},
		{"named string kind", reflect.TypeFor[withMode](), true},
		{"flat", reflect.TypeFor[flatIn](), true},
	} {
		if got := newFlatDecoder(c.t) != nil; got != c.flat {
			t.Errorf("%s: flat decoder %v, want %v", c.name, got, c.flat)
		}
	}
}

// TestTyped_FlatAndFallbackAgree runs a typed tool's handler on arguments
// the flat decoder reads and on arguments it leaves to encoding/json
// (after setting some fields): the function sees what encoding/json
// decodes, and what encoding/json refuses is answered as invalid
// arguments.
func TestTyped_FlatAndFallbackAgree(t *testing.T) {
	var seen []flatIn
	tool := MustNewTyped(Definition{Name: "t", Schema: json.RawMessage(`{}`)}, func(_ context.Context, in flatIn) (bool, error) {
		seen = append(seen, in)
		return true, nil
	})
	h := tool.def.Handler
	for _, doc := range []string{`{"s":"a","i":2}`, `{"s":"a","i":2,"u8":1,"S":"b"}`, `{"i":3,"s":"a\nb"}`} {
		if _, err := h(context.Background(), json.RawMessage(doc)); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		var want flatIn
		if err := json.Unmarshal([]byte(doc), &want); err != nil {
			t.Fatal(err)
		}
		if got := seen[len(seen)-1]; got != want {
			t.Errorf("%s: handler got %+v, want %+v", doc, got, want)
		}
	}
	_, err := h(context.Background(), json.RawMessage(`{"s":"a","i":"x"}`))
	var ae *ArgumentsError
	if !errors.As(err, &ae) || err.Error() != `invalid arguments for tool "t": /i: cannot decode string into a Go int` {
		t.Errorf("error %v, want encoding/json's refusal as invalid arguments", err)
	}
}

// TestTyped_FlatArgumentsStayOnTheStack: arguments the flat decoder reads
// are decoded into the handler's stack, not a value on the heap (only
// encoding/json's fallback, which keeps a pointer, decodes into one).
func TestTyped_FlatArgumentsStayOnTheStack(t *testing.T) {
	tool := MustNewTyped(Definition{Name: "t", Schema: json.RawMessage(`{}`)}, func(_ context.Context, in flatIn) (bool, error) {
		return in.I == 2, nil
	})
	h, args, ctx := tool.def.Handler, json.RawMessage(`{"i":2,"b":true}`), context.Background()
	var ok any
	n := testing.AllocsPerRun(100, func() { ok, _ = h(ctx, args) })
	if ok != true {
		t.Fatalf("handler returned %v", ok)
	}
	if n != 0 && !raceDetector {
		t.Errorf("a call decoding flat arguments allocates %.0f times, want 0", n)
	}
}

func FuzzFlatDecoder(f *testing.F) {
	for _, s := range []string{`{"s":"a","i":1}`, `{"f64":1e3,"b":true}`, `{"u8":255}`, `{"i":-0}`, `{"s":"é"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		checkLikeEncodingJSON(t, doc)
	})
}

// flatOutT has a field of every kind the flat encoder writes.
type flatOutT struct {
	S     string `json:"s"`
	Empty string `json:"empty,omitempty"`
	B     bool   `json:"b"`
	NoB   bool   `json:"nob,omitzero"`
	I     int    `json:"i"`
	I8    int8
	I64   int64  `json:"i64,omitempty"`
	U16   uint16 `json:"u16"`
	U64   uint64 `json:"u64,omitempty"`
	Mode  mode   `json:"mode"`
	Skip  string `json:"-"`
	quiet int
}

// checkEncodesLikeEncodeResult fails when the flat encoder encodes v
// other than encodeResult does; it reports whether it encoded v.
func checkEncodesLikeEncodeResult(t testing.TB, v flatOutT) bool {
	t.Helper()
	e := newFlatEncoder(reflect.TypeFor[flatOutT]())
	if e == nil {
		t.Fatal("flatOutT is not encodable by the flat encoder")
	}
	got, ok := e.encode(unsafe.Pointer(&v))
	if !ok {
		return false
	}
	want, err := encodeResult(v)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("%+v: flat encoder gives %s, encodeResult %s", v, got, want)
	}
	return true
}

func TestFlatEncoder_EncodesAsEncodeResult(t *testing.T) {
	for _, v := range []flatOutT{
		{},
		{S: "ok", B: true, I: -3, I8: -128, U16: 65535, Mode: "m", Skip: "x", quiet: 1},
		{Empty: "e", NoB: true, I64: 1 << 62, U64: 1<<64 - 1},
		{S: "a <b> & 'c' ~ {}"},
	} {
		if !checkEncodesLikeEncodeResult(t, v) {
			t.Errorf("flat encoder declines %+v", v)
		}
	}
	for _, s := range []string{"a\"b", `a\b`, "a\nb", "é", "\u2028", "\x7f", "\xff"} {
		if checkEncodesLikeEncodeResult(t, flatOutT{S: s}) {
			t.Errorf("flat encoder encodes %q", s)
		}
	}
}

func TestFlatEncoder_TypesLeftToEncodingJSON(t *testing.T) {
	type withFloat struct{ F float64 }
	type withStringOpt struct {
		N int `json:"n,string"`
	}
	type withSlice struct{ L []int }
	type withRaw struct{ R json.RawMessage }
	type withTime struct{ T zeroer }
	for _, c := range []struct {
		name string
		t    reflect.Type
	}{
		{"float", reflect.TypeFor[withFloat]()},
		{"string option", reflect.TypeFor[withStringOpt]()},
		{"slice", reflect.TypeFor[withSlice]()},
		{"custom marshaler", reflect.TypeFor[withRaw]()},
		{"IsZero method", reflect.TypeFor[withTime]()},
		{"not a struct", reflect.TypeFor[string]()},
	} {
		if newFlatEncoder(c.t) != nil {
			t.Errorf("%s: encoded by the flat encoder", c.name)
		}
	}
}

type zeroer int

func (zeroer) IsZero() bool { return true }

// TestTyped_EncodedResult: a typed tool's flat result reaches the
// TOOL_RESULT as encodeResult would write it, and a result the flat
// encoder declines is encoded by encoding/json.
func TestTyped_EncodedResult(t *testing.T) {
	tool := MustNewTyped(Definition{Name: "t", Sync: true}, func(_ context.Context, in struct {
		S string `json:"s"`
	}) (flatOutT, error) {
		return flatOutT{S: in.S, B: true}, nil
	})
	for _, s := range []string{"plain", "with \\\"quotes\\\" and é"} {
		call := messages.ToolCall("s", "c", "t", json.RawMessage(`{"s":"`+s+`"}`))
		res := tool.callInline(&inlineCtx{}, call)
		var in struct{ S string }
		if err := json.Unmarshal([]byte(`{"s":"`+s+`"}`), &in); err != nil {
			t.Fatal(err)
		}
		want, _ := encodeResult(flatOutT{S: in.S, B: true})
		if KindOf(res) != "" || string(res.GetPayload()) != string(want) {
			t.Errorf("%s: result %s, want %s", s, messages.Format(res), want)
		}
	}
}

func FuzzFlatEncoder(f *testing.F) {
	f.Add("ok", true, int64(-1), uint64(2))
	f.Add("", false, int64(0), uint64(0))
	f.Fuzz(func(t *testing.T, s string, b bool, n int64, u uint64) {
		checkEncodesLikeEncodeResult(t, flatOutT{S: s, Empty: s, B: b, NoB: b, I: int(n), I8: int8(n), I64: n, U16: uint16(u), U64: u, Mode: mode(s)})
	})
}

// numIn has a field of each number kind; none is required.
type numIn struct {
	I   int     `json:"i,omitempty"`
	I8  int8    `json:"i8,omitempty"`
	I64 int64   `json:"i64,omitempty"`
	U   uint    `json:"u,omitempty"`
	U8  uint8   `json:"u8,omitempty"`
	U64 uint64  `json:"u64,omitempty"`
	F32 float32 `json:"f32,omitempty"`
	F64 float64 `json:"f64,omitempty"`
	L   []int   `json:"l,omitempty"`
}

// numbers are literals around what the fields of numIn hold: integral
// ones written with fractions and exponents, fractions, the bounds.
var numbers = []string{
	"2", "2.0", "2e0", "20E-1", "0.2e+1", "-0.0", "0e9999", "-2.0", "2.5", "2.000000000000000001", "1e-1",
	"1.27e2", "1.28e2", "-1.28e2", "-1.29e2", "255.0", "2.56e2", "-1.0", "1e19", "1.8446744073709551615e19",
	"1.8446744073709551616e19", "9.223372036854775807e18", "9.223372036854775808e18", "-9.223372036854775808e18",
	"-9.223372036854775809e18", "0.00000000000000000001e20", "1e30", "1E400", "1e-400", "3.4e38", "1e39",
}

// TestTyped_DecodesWhatTheValidatorAccepts: for every number the inferred
// schema of numIn accepts in a field, the function gets the number's
// value when the field can hold it, and otherwise the call is invalid
// arguments: never a handler failure (which counts against the circuit
// breaker).
func TestTyped_DecodesWhatTheValidatorAccepts(t *testing.T) {
	tool := MustNewTyped(Definition{Name: "t"}, func(_ context.Context, in numIn) (numIn, error) { return in, nil })
	typ := reflect.TypeFor[numIn]()
	accepted := 0
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		for _, lit := range numbers {
			doc := `{"` + name + `":` + lit + `}`
			if f.Type.Kind() == reflect.Slice {
				doc = `{"` + name + `":[1,` + lit + `]}`
			}
			if _, err := tool.validator.validate(json.RawMessage(doc)); err != nil {
				continue
			}
			accepted++
			out, err := tool.def.Handler(context.Background(), json.RawMessage(doc))
			var ae *ArgumentsError
			if err != nil && !errors.As(err, &ae) {
				t.Errorf("%s: valid arguments answered %v, not invalid arguments", doc, err)
				continue
			}
			kind := f.Type.Kind()
			if kind == reflect.Slice {
				kind = f.Type.Elem().Kind()
			}
			want, fits := numberValue(t, lit, kind)
			switch {
			case fits && err != nil:
				t.Errorf("%s: answered %v, want %v in %s", doc, err, want, f.Name)
			case !fits && err == nil:
				t.Errorf("%s: decoded to %+v, which %s cannot hold", doc, out, f.Type)
			case fits:
				got := reflect.ValueOf(out).Field(i)
				if got.Kind() == reflect.Slice {
					got = got.Index(1)
				}
				if got.Interface() != want {
					t.Errorf("%s: %s is %v, want %v", doc, f.Name, got, want)
				}
			}
		}
	}
	if accepted < len(numbers) {
		t.Errorf("the schema accepted %d documents only", accepted)
	}
}

// numberValue is lit, a number the schema accepted, as a value of kind,
// and whether that kind holds it (an integer kind holds an integer within
// its range, a float one any number but one beyond its largest).
func numberValue(t *testing.T, lit string, kind reflect.Kind) (any, bool) {
	t.Helper()
	switch kind {
	case reflect.Float32, reflect.Float64:
		bits := 64
		if kind == reflect.Float32 {
			bits = 32
		}
		f, err := strconv.ParseFloat(lit, bits)
		if bits == 32 {
			return float32(f), err == nil
		}
		return f, err == nil
	}
	r, ok := new(big.Rat).SetString(lit)
	if !ok || !r.IsInt() {
		t.Fatalf("the schema accepts %s for an integer", lit)
	}
	n := r.Num()
	v := reflect.New(reflect.TypeFor[int]()).Elem()
	switch kind {
	case reflect.Int8:
		v = reflect.New(reflect.TypeFor[int8]()).Elem()
	case reflect.Int64:
		v = reflect.New(reflect.TypeFor[int64]()).Elem()
	case reflect.Uint:
		v = reflect.New(reflect.TypeFor[uint]()).Elem()
	case reflect.Uint8:
		v = reflect.New(reflect.TypeFor[uint8]()).Elem()
	case reflect.Uint64:
		v = reflect.New(reflect.TypeFor[uint64]()).Elem()
	}
	if v.CanInt() {
		if !n.IsInt64() || v.OverflowInt(n.Int64()) {
			return nil, false
		}
		v.SetInt(n.Int64())
	} else {
		if !n.IsUint64() || v.OverflowUint(n.Uint64()) {
			return nil, false
		}
		v.SetUint(n.Uint64())
	}
	return v.Interface(), true
}

// FuzzTypedDecode: arguments the schema accepts are never a handler
// failure of a typed tool: decoded, or invalid arguments.
func FuzzTypedDecode(f *testing.F) {
	tool := MustNewTyped(Definition{Name: "t"}, func(_ context.Context, in numIn) (numIn, error) { return in, nil })
	for _, doc := range []string{`{"i":2.0}`, `{"u8":2.55e2,"l":[1e0,-0.0]}`, `{"i64":9.3e18}`, `{"f32":1e39}`, `{"u":-0e5}`} {
		f.Add(doc)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		if _, err := tool.validator.validate(json.RawMessage(doc)); err != nil {
			return
		}
		var ae *ArgumentsError
		if _, err := tool.def.Handler(context.Background(), json.RawMessage(doc)); err != nil && !errors.As(err, &ae) {
			t.Fatalf("%s: valid arguments answered %v, not invalid arguments", doc, err)
		}
	})
}
