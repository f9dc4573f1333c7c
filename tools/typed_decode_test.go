package tools

import (
	"context"
	"encoding/json"
	"reflect"
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
// decodes, and a decoding error is worded by encoding/json.
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
	if err == nil || !strings.Contains(err.Error(), "decode arguments: json: cannot unmarshal string") {
		t.Errorf("error %v, want encoding/json's", err)
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
