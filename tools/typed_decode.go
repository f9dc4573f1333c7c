package tools

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// flatDecoder decodes the arguments of a typed tool whose input is a flat
// struct (fields of kind string, bool, integer or float, by their json
// names) without encoding/json: most tool arguments are such an object,
// and json.Unmarshal's decode state, scanner and reflection cost a typed
// call more than the rest of its run. It reads only what it is sure to
// decode exactly as encoding/json would: keys that name a field as they
// are, strings without escapes, numbers that fit, true and false. Anything
// else (escapes, null, nesting, unknown or case-folded keys, invalid
// UTF-8, a number out of range, a type mismatch) makes it decline, and
// the caller decodes with encoding/json, which also words the errors.
type flatDecoder struct {
	fields []flatField
}

type flatField struct {
	name   string
	offset uintptr
	kind   reflect.Kind
}

var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	jsonNumberType      = reflect.TypeFor[json.Number]() // a string encoding/json checks as a number
)

// newFlatDecoder returns the decoder of t, or nil when t is not a flat
// struct it can decode.
func newFlatDecoder(t reflect.Type) *flatDecoder {
	if t.Kind() != reflect.Struct || customUnmarshal(t) {
		return nil
	}
	d := &flatDecoder{}
	seen := map[string]bool{}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, hasTag := sf.Tag.Lookup("json")
		if tag == "-" {
			continue
		}
		if sf.Anonymous || !sf.IsExported() {
			return nil // embedded fields' promotion rules, unexported fields: left to encoding/json
		}
		name, opts, _ := strings.Cut(tag, ",")
		for opt := range strings.SplitSeq(opts, ",") {
			if opt == "string" {
				return nil
			}
		}
		if !hasTag || name == "" {
			name = sf.Name
		}
		if !plainName(name) || seen[name] {
			return nil
		}
		seen[name] = true
		switch k := sf.Type.Kind(); k {
		case reflect.String, reflect.Bool,
			reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
			reflect.Float32, reflect.Float64:
			if customUnmarshal(sf.Type) || sf.Type == jsonNumberType {
				return nil
			}
			d.fields = append(d.fields, flatField{name: name, offset: sf.Offset, kind: k})
		default:
			return nil
		}
	}
	return d
}

// customUnmarshal reports whether encoding/json would decode t (or *t)
// with a method of its own.
func customUnmarshal(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return t.Implements(jsonUnmarshalerType) || p.Implements(jsonUnmarshalerType) ||
		t.Implements(textUnmarshalerType) || p.Implements(textUnmarshalerType)
}

// plainName reports whether name is made of ASCII letters, digits and
// underscores only (a json tag encoding/json takes as it is).
func plainName(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return name != ""
}

// decode decodes data into the struct at dst, which must be the zero
// value of the decoder's type. It returns false when it declined; dst may
// then hold some fields and must be zeroed again before encoding/json
// decodes into it.
func (d *flatDecoder) decode(data []byte, dst unsafe.Pointer) bool {
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i = skipWS(data, i+1)
	if i < len(data) && data[i] == '}' {
		return skipWS(data, i+1) == len(data)
	}
	for {
		key, next, ok := plainString(data, i)
		if !ok {
			return false
		}
		f := d.field(key)
		if f == nil {
			return false
		}
		i = skipWS(data, next)
		if i >= len(data) || data[i] != ':' {
			return false
		}
		if i, ok = f.set(data, skipWS(data, i+1), unsafe.Add(dst, f.offset)); !ok {
			return false
		}
		i = skipWS(data, i)
		if i >= len(data) {
			return false
		}
		switch data[i] {
		case ',':
			i = skipWS(data, i+1)
		case '}':
			return skipWS(data, i+1) == len(data)
		default:
			return false
		}
	}
}

func (d *flatDecoder) field(key []byte) *flatField {
	for i := range d.fields {
		if d.fields[i].name == string(key) {
			return &d.fields[i]
		}
	}
	return nil
}

// set reads the value at data[i:] into the field at p and returns the
// index after it.
func (f *flatField) set(data []byte, i int, p unsafe.Pointer) (int, bool) {
	switch f.kind {
	case reflect.String:
		s, next, ok := plainString(data, i)
		if !ok {
			return 0, false
		}
		*(*string)(p) = string(s)
		return next, true
	case reflect.Bool:
		switch {
		case hasWord(data, i, "true"):
			*(*bool)(p) = true
			return i + 4, true
		case hasWord(data, i, "false"):
			*(*bool)(p) = false
			return i + 5, true
		}
		return 0, false
	}
	num, integer := number(data, i)
	if num == 0 {
		return 0, false
	}
	s := unsafe.String(&data[i], num) // parsed only, not kept
	switch f.kind {
	case reflect.Float32, reflect.Float64:
		bits := 64
		if f.kind == reflect.Float32 {
			bits = 32
		}
		v, err := strconv.ParseFloat(s, bits)
		if err != nil {
			return 0, false
		}
		if bits == 32 {
			*(*float32)(p) = float32(v)
		} else {
			*(*float64)(p) = v
		}
		return i + num, true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if !integer {
			return 0, false
		}
		v, err := strconv.ParseInt(s, 10, intBits(f.kind))
		if err != nil {
			return 0, false
		}
		switch f.kind {
		case reflect.Int:
			*(*int)(p) = int(v)
		case reflect.Int8:
			*(*int8)(p) = int8(v)
		case reflect.Int16:
			*(*int16)(p) = int16(v)
		case reflect.Int32:
			*(*int32)(p) = int32(v)
		default:
			*(*int64)(p) = v
		}
		return i + num, true
	default: // the unsigned kinds
		if !integer || data[i] == '-' {
			return 0, false
		}
		v, err := strconv.ParseUint(s, 10, intBits(f.kind))
		if err != nil {
			return 0, false
		}
		switch f.kind {
		case reflect.Uint:
			*(*uint)(p) = uint(v)
		case reflect.Uint8:
			*(*uint8)(p) = uint8(v)
		case reflect.Uint16:
			*(*uint16)(p) = uint16(v)
		case reflect.Uint32:
			*(*uint32)(p) = uint32(v)
		case reflect.Uintptr:
			*(*uintptr)(p) = uintptr(v)
		default:
			*(*uint64)(p) = v
		}
		return i + num, true
	}
}

func intBits(k reflect.Kind) int {
	switch k {
	case reflect.Int8, reflect.Uint8:
		return 8
	case reflect.Int16, reflect.Uint16:
		return 16
	case reflect.Int32, reflect.Uint32:
		return 32
	case reflect.Int64, reflect.Uint64:
		return 64
	}
	return strconv.IntSize
}

func skipWS(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func hasWord(data []byte, i int, w string) bool {
	return len(data)-i >= len(w) && string(data[i:i+len(w)]) == w
}

// plainString reads a JSON string at data[i:] that holds no escape and
// is valid UTF-8, returning its content and the index after its quote.
func plainString(data []byte, i int) ([]byte, int, bool) {
	if i >= len(data) || data[i] != '"' {
		return nil, 0, false
	}
	ascii := true
	for j := i + 1; j < len(data); j++ {
		switch c := data[j]; {
		case c == '"':
			s := data[i+1 : j]
			if !ascii && !utf8.Valid(s) {
				return nil, 0, false // encoding/json replaces invalid bytes
			}
			return s, j + 1, true
		case c == '\\' || c < 0x20:
			return nil, 0, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, 0, false
}

// number returns the length of the JSON number at data[i:] (0 when there
// is none) and whether it is an integer (no fraction, no exponent).
func number(data []byte, i int) (n int, integer bool) {
	j := i
	if j < len(data) && data[j] == '-' {
		j++
	}
	switch {
	case j < len(data) && data[j] == '0':
		j++
	case j < len(data) && data[j] >= '1' && data[j] <= '9':
		for j < len(data) && data[j] >= '0' && data[j] <= '9' {
			j++
		}
	default:
		return 0, false
	}
	integer = true
	if j < len(data) && data[j] == '.' {
		integer = false
		j++
		start := j
		for j < len(data) && data[j] >= '0' && data[j] <= '9' {
			j++
		}
		if j == start {
			return 0, false
		}
	}
	if j < len(data) && (data[j] == 'e' || data[j] == 'E') {
		integer = false
		j++
		if j < len(data) && (data[j] == '+' || data[j] == '-') {
			j++
		}
		start := j
		for j < len(data) && data[j] >= '0' && data[j] <= '9' {
			j++
		}
		if j == start {
			return 0, false
		}
	}
	return j - i, integer
}

// flatEncoder encodes the result of a typed tool whose output is a flat
// struct (fields of kind string, bool or integer) without encoding/json,
// when that gives the bytes encodeResult would: it declines a string
// holding anything but printable ASCII other than quote and backslash
// (what encoding/json escapes, replaces or may escape), and the caller
// encodes with encoding/json.
type flatEncoder struct {
	fields []flatOut
}

type flatOut struct {
	key    string // `"name":`, with the comma before it for all but the first
	offset uintptr
	kind   reflect.Kind
	omit   bool // omitempty or omitzero: the zero value is left out
}

var (
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// newFlatEncoder returns the encoder of t, or nil when t is not a flat
// struct it can encode.
func newFlatEncoder(t reflect.Type) *flatEncoder {
	if t.Kind() != reflect.Struct || customMarshal(t) {
		return nil
	}
	e := &flatEncoder{}
	seen := map[string]bool{}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, hasTag := sf.Tag.Lookup("json")
		if tag == "-" {
			continue
		}
		if sf.Anonymous {
			return nil
		}
		if !sf.IsExported() {
			continue // encoding/json leaves it out
		}
		name, opts, _ := strings.Cut(tag, ",")
		omit := false
		for opt := range strings.SplitSeq(opts, ",") {
			switch opt {
			case "string":
				return nil
			case "omitempty", "omitzero":
				omit = true
			}
		}
		if !hasTag || name == "" {
			name = sf.Name
		}
		if !plainName(name) || seen[name] {
			return nil
		}
		seen[name] = true
		switch k := sf.Type.Kind(); k {
		case reflect.String, reflect.Bool,
			reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			if customMarshal(sf.Type) || sf.Type == jsonNumberType || hasIsZero(sf.Type) {
				return nil
			}
			e.fields = append(e.fields, flatOut{key: `"` + name + `":`, offset: sf.Offset, kind: k, omit: omit})
		default:
			return nil
		}
	}
	return e
}

// customMarshal reports whether encoding/json would encode t (or *t)
// with a method of its own.
func customMarshal(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return t.Implements(jsonMarshalerType) || p.Implements(jsonMarshalerType) ||
		t.Implements(textMarshalerType) || p.Implements(textMarshalerType)
}

// hasIsZero reports whether t has an IsZero method, which omitzero asks.
func hasIsZero(t reflect.Type) bool {
	_, ok := t.MethodByName("IsZero")
	_, pok := reflect.PointerTo(t).MethodByName("IsZero")
	return ok || pok
}

// encode returns the encoding of the struct at src, in a new slice, or
// false when it declined.
func (e *flatEncoder) encode(src unsafe.Pointer) (json.RawMessage, bool) {
	var scratch [256]byte
	b := append(scratch[:0], '{')
	first := true
	for i := range e.fields {
		f := &e.fields[i]
		p := unsafe.Add(src, f.offset)
		var n int64
		var u uint64
		var signed bool
		switch f.kind {
		case reflect.String:
			s := *(*string)(p)
			if f.omit && s == "" {
				continue
			}
			if !plainASCII(s) {
				return nil, false
			}
			b = appendKey(b, f.key, &first)
			b = append(append(append(b, '"'), s...), '"')
			continue
		case reflect.Bool:
			v := *(*bool)(p)
			if f.omit && !v {
				continue
			}
			b = appendKey(b, f.key, &first)
			b = strconv.AppendBool(b, v)
			continue
		case reflect.Int:
			n, signed = int64(*(*int)(p)), true
		case reflect.Int8:
			n, signed = int64(*(*int8)(p)), true
		case reflect.Int16:
			n, signed = int64(*(*int16)(p)), true
		case reflect.Int32:
			n, signed = int64(*(*int32)(p)), true
		case reflect.Int64:
			n, signed = *(*int64)(p), true
		case reflect.Uint:
			u = uint64(*(*uint)(p))
		case reflect.Uint8:
			u = uint64(*(*uint8)(p))
		case reflect.Uint16:
			u = uint64(*(*uint16)(p))
		case reflect.Uint32:
			u = uint64(*(*uint32)(p))
		case reflect.Uintptr:
			u = uint64(*(*uintptr)(p))
		default:
			u = *(*uint64)(p)
		}
		if f.omit && n == 0 && u == 0 {
			continue
		}
		b = appendKey(b, f.key, &first)
		if signed {
			b = strconv.AppendInt(b, n, 10)
		} else {
			b = strconv.AppendUint(b, u, 10)
		}
	}
	b = append(b, '}')
	return json.RawMessage(bytes.Clone(b)), true
}

func appendKey(b []byte, key string, first *bool) []byte {
	if !*first {
		b = append(b, ',')
	}
	*first = false
	return append(b, key...)
}

// plainASCII reports whether s is printable ASCII without quote and
// backslash: what encodeResult writes as it is (it does not escape HTML).
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// decodeArguments decodes the arguments of a typed tool into a new In as
// encoding/json does, except that an integral number written with a
// fraction or an exponent (2.0, 2e0), which JSON Schema's "integer"
// accepts, is read into an integer as the integer it is, where
// encoding/json refuses it: when encoding/json refuses a value's type,
// the arguments are decoded again with such numbers written as integers
// (what a json.Number or json.RawMessage among them then holds). An error
// is an *ArgumentsError of tool: the arguments were validated, so what
// In cannot hold (a number out of its range, a value the schema allows
// and In does not) is the call's fault, not the tool's.
func decodeArguments[In any](tool string, args json.RawMessage) (*In, error) {
	in := new(In)
	err := json.Unmarshal(args, in)
	var te *json.UnmarshalTypeError
	if err != nil && errors.As(err, &te) {
		if plain, ok := integralNumbers(args); ok {
			in = new(In) // not what the first decoding set
			err = json.Unmarshal(plain, in)
		}
	}
	if err != nil {
		return nil, &ArgumentsError{Tool: tool, Problems: []string{decodeProblem(err)}}
	}
	return in, nil
}

// decodeProblem words a decoding error as a line of
// ArgumentsError.Problems: where, and what is wrong.
func decodeProblem(err error) string {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return "/: " + strings.TrimPrefix(err.Error(), "json: ")
	}
	at := "/" + strings.ReplaceAll(te.Field, ".", "/")
	literal, isNumber := strings.CutPrefix(te.Value, "number ")
	switch te.Type.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if isNumber {
			if _, integral := integerForm([]byte(literal)); !integral {
				return fmt.Sprintf("%s: %s is not an integer, as a Go %s must be", at, literal, te.Type)
			}
			return fmt.Sprintf("%s: %s is out of the range of a Go %s", at, literal, te.Type)
		}
	case reflect.Float32, reflect.Float64:
		if isNumber {
			return fmt.Sprintf("%s: %s is out of the range of a Go %s", at, literal, te.Type)
		}
	}
	return fmt.Sprintf("%s: cannot decode %s into a Go %s", at, te.Value, te.Type)
}

// maxIntegerDigits is the number of digits of the largest Go integer
// (uint64's 18446744073709551615): an integral number of more digits is
// left as it is written, which no integer holds either.
const maxIntegerDigits = 20

// integralNumbers returns data, valid JSON, with every integral number
// written with a fraction or an exponent (2.0, 2e0, -0.0) written as an
// integer (2, 2, 0) instead, and whether there was any. Strings are left
// as they are.
func integralNumbers(data []byte) ([]byte, bool) {
	var out []byte
	last := 0 // data[:last] is in out already
	for i := 0; i < len(data); {
		switch c := data[i]; {
		case c == '"':
			i = stringEnd(data, i)
		case c == '-' || c >= '0' && c <= '9':
			n, integer := number(data, i)
			if n == 0 {
				return nil, false // not valid JSON: left to encoding/json
			}
			if !integer {
				if plain, _ := integerForm(data[i : i+n]); plain != nil {
					out = append(append(out, data[last:i]...), plain...)
					last = i + n
				}
			}
			i += n
		default:
			i++
		}
	}
	if out == nil {
		return nil, false
	}
	return append(out, data[last:]...), true
}

// integerForm returns the JSON number lit written as an integer, without
// fraction or exponent. integral is false when it is not an integer;
// plain is nil then, and when it is one of more than maxIntegerDigits
// digits, which it is not worth writing out.
func integerForm(lit []byte) (plain []byte, integral bool) {
	negative := lit[0] == '-'
	if negative {
		lit = lit[1:]
	}
	mantissa, exponent, _ := bytes.Cut(bytes.ToLower(lit), []byte("e"))
	whole, fraction, _ := bytes.Cut(mantissa, []byte("."))
	digits := append(bytes.Clone(whole), fraction...)
	point := len(whole) // the decimal point is after digits[:point], before the exponent
	digits = bytes.TrimLeft(digits, "0")
	point -= len(whole) + len(fraction) - len(digits)
	digits = bytes.TrimRight(digits, "0")
	if len(digits) == 0 {
		return []byte("0"), true // zero, whatever its sign and exponent
	}
	if len(exponent) > 0 {
		// "+3", "-3" and "3" all parse; an exponent beyond ±2³⁰ is far
		// beyond what the digits here could make up for.
		e, err := strconv.Atoi(string(exponent))
		if err != nil || e > 1<<30 || e < -1<<30 {
			return nil, exponent[0] != '-'
		}
		point += e
	}
	if point < len(digits) {
		return nil, false
	}
	if point > maxIntegerDigits {
		return nil, true
	}
	plain = make([]byte, 0, point+1)
	if negative {
		plain = append(plain, '-')
	}
	plain = append(plain, digits...)
	for range point - len(digits) {
		plain = append(plain, '0')
	}
	return plain, true
}
