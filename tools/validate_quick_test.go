package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
)

// TestQuickSchema_NeverAcceptsWhatTheValidatorRejects checks, on every
// pairing of schemas and documents below, that the quick path accepts
// only what the general validator accepts, and that it does accept the
// valid documents of the schemas it compiles (else it would save nothing).
func TestQuickSchema_NeverAcceptsWhatTheValidatorRejects(t *testing.T) {
	schemas := []string{
		`{}`,
		`true`,
		defaultSchemaJSON,
		`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}`,
		`{"type":"object","properties":{"n":{"type":"integer"},"s":{"type":"string"},"l":{"type":["null","array"],"items":{"type":"string"}},"sub":{"type":["null","object"],"properties":{"a":{"type":"boolean"}},"required":["a"],"additionalProperties":false},"f":{"type":"number"},"m":{"type":"object","additionalProperties":{"type":"integer"}}},"required":["n"],"additionalProperties":false}`,
		`{"type":"object","properties":{"name":{"type":"string","description":"who"},"n":{"type":"integer"}},"required":["name"]}`,
		`{"type":["integer","string"]}`,
		`{"type":"array","items":{"type":"number"}}`,
		`{"type":"object","properties":{"x":false}}`,
		`{"type":"object","properties":{"s":{"type":"string","minLength":3}}}`,
		`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`,
	}
	docs := []string{
		`{}`, `{"n":1}`, `{"n":1.0}`, `{"n":1e2}`, `{"n":-7}`, `{"n":1.5}`, `{"n":"1"}`, `{"n":null}`,
		`{"n":1,"extra":true}`, `{"name":"Ada"}`, `{"name":"Ada","n":3}`, `{"name":3}`, `{"n":2,"s":"ab"}`,
		`{"n":2,"s":"abcd"}`, `{"n":2,"l":["a","b"]}`, `{"n":2,"l":null}`, `{"n":2,"l":["a",1]}`,
		`{"n":2,"sub":{"a":true}}`, `{"n":2,"sub":{}}`, `{"n":2,"sub":{"a":true,"b":1}}`, `{"n":2,"sub":null}`,
		`{"n":2,"f":0.25}`, `{"n":2,"m":{"a":1,"b":2}}`, `{"n":2,"m":{"a":"x"}}`, `{"x":1}`,
		`[]`, `[1,2.5]`, `[1,"a"]`, `"str"`, `12`, `12.5`, `null`, `true`, `false`, `-0`, `1E2`,
		// Read in place: whitespace anywhere, escapes in keys and strings,
		// repeated keys, nesting.
		" {\n\t\"n\" : 1 ,\r\n \"s\" : \"a\\\"}\\\\\" } ", `{"\u006e":1}`, `{"n":1,"n":2}`, `{"n":1,"n":"x"}`,
		`{"n":2,"l":[ ],"sub":{ "a" : false }}`, `{"n":2,"m":{}}`, `{"n":2,"m":{"a":[1]}}`, `[[1],{"n":1}]`,
		`{"name":"Ada","extra":{"deep":[{"x":[null,true,"]}"]}]}}`, `{"n":2,"s":"{\"n\":\"x\"}"}`,
		// Integral numbers written with a fraction or an exponent, which
		// "integer" accepts, and near misses.
		`{"n":2e0}`, `{"n":20E-1}`, `{"n":0.2e+1}`, `{"n":-0.0}`, `{"n":0e9999}`, `{"n":2.000000000000000001}`,
		`{"n":1e30}`, `{"n":1E400}`, `{"n":1e-400}`, `{"n":2,"m":{"a":2.0,"b":2.5}}`, `[2.0,1e-1]`,
	}
	leftToValidator := map[string]bool{`{"\u006e":1}`: true, `{"n":1,"n":2}`: true, `{"n":1,"n":"x"}`: true}
	for _, schema := range schemas {
		v, err := compileSchema("t", json.RawMessage(schema))
		if err != nil {
			t.Fatalf("schema %s: %v", schema, err)
		}
		for _, doc := range docs {
			t.Run(fmt.Sprintf("%s/%s", schema, doc), func(t *testing.T) {
				valid := generalAccepts(t, v, []byte(doc))
				quick := v.quick != nil && v.quick.accepts([]byte(doc))
				if quick && !valid {
					t.Errorf("quick path accepts what the validator rejects")
				}
				// Left to the validator: numbers that may be integers, keys
				// with escapes, repeated keys.
				if v.quick != nil && valid && !quick && !bytes.ContainsAny([]byte(doc), ".eE") && !leftToValidator[doc] {
					t.Errorf("quick path rejects a valid document it could have accepted")
				}
			})
		}
	}
}

// generalAccepts reports whether the general validator of v accepts doc,
// valid JSON.
func generalAccepts(t *testing.T, v *validator, doc []byte) bool {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var d any
	if err := dec.Decode(&d); err != nil {
		t.Fatal(err)
	}
	return v.schema.Validate(d) == nil
}

// TestQuickSchema_Bounds: with minimum, maximum and their exclusive
// forms, the quick path accepts only numbers the validator accepts (it
// compares exactly), at bounds a float64 cannot hold too, and accepts
// the numbers well within the bounds.
func TestQuickSchema_Bounds(t *testing.T) {
	schemas := []string{
		`{"type":"integer","minimum":-9223372036854775808,"maximum":9223372036854775807}`,
		`{"type":"integer","minimum":0,"maximum":18446744073709551615}`,
		`{"type":"number","exclusiveMinimum":-340282356779733661637539395458142568448,"exclusiveMaximum":340282356779733661637539395458142568448}`,
		`{"type":"number","minimum":0.1,"exclusiveMaximum":0.3}`,
		`{"type":"integer","minimum":123456789012345678,"maximum":123456789012345679}`,
		`{"type":"integer","exclusiveMinimum":-3,"exclusiveMaximum":3}`,
		`{"type":"array","items":{"type":"integer","minimum":1,"maximum":1e400}}`,
		`{"type":"number","maximum":-1e400}`,
		`{"type":"number","minimum":1.0000000000000001,"maximum":2.9999999999999999}`,
	}
	nums := []string{
		"0", "-0", "1", "-1", "2", "3", "-3", "2.9999999999999999", "-2.9999999999999999", "0.1", "0.1000000000000000001",
		"0.09999999999999999", "0.3", "0.29999999999999999", "0.2", "9223372036854775807", "9223372036854775808",
		"9223372036854774784", "-9223372036854775808", "-9223372036854775809", "18446744073709551615",
		"18446744073709551616", "1.8446744073709551615e19", "123456789012345678", "123456789012345679",
		"123456789012345677", "123456789012345680", "3.4028235e38", "340282356779733661637539395458142568447",
		"340282356779733661637539395458142568448", "-3.4028236e38", "1e400", "-1e400", "1e-400", "999999999999999",
		"-999999999999999", "1000000000000000", "4.5", "9223372036854774783", "9223372036854774785",
		"9223372036854773760", "18446744073709549568", "18446744073709549569", "0.30000000000000004", "1.0", "1e0",
	}
	for _, schema := range schemas {
		v, err := compileSchema("t", json.RawMessage(schema))
		if err != nil || v.quick == nil {
			t.Fatalf("schema %s: %v (quick %v)", schema, err, v != nil && v.quick != nil)
		}
		for _, n := range nums {
			for _, doc := range []string{n, "[" + n + "," + n + "]"} {
				if v.quick.accepts([]byte(doc)) && !generalAccepts(t, v, []byte(doc)) {
					t.Errorf("%s: the quick path accepts %s, which the validator rejects", schema, doc)
				}
			}
		}
	}
	for schema, docs := range map[string][]string{
		schemas[0]: {"0", "-0", "1", "-9223372036854774784", "9223372036854773760", "123456789"},
		schemas[1]: {"0", "18446744073709547520", "42"},
		schemas[2]: {"0", "4.5", "-3.4028235e38", "3.4028235e38", "1e38"},
		schemas[3]: {"0.2", "0.10000000000000002", "0.29999999999999993"},
		schemas[5]: {"-2", "2", "0"},
		schemas[6]: {"[1,2,100000000000000000000]"},
	} {
		v, _ := compileSchema("t", json.RawMessage(schema))
		for _, doc := range docs {
			if !v.quick.accepts([]byte(doc)) {
				t.Errorf("%s: the quick path leaves %s, well within the bounds, to the validator", schema, doc)
			}
		}
	}
}

// FuzzQuickSchema: on any valid JSON, the quick path reading the bytes
// in place never panics and never accepts what the validator rejects.
func FuzzQuickSchema(f *testing.F) {
	schemas := []string{
		`{"type":"object","properties":{"n":{"type":"integer"},"s":{"type":"string"},"l":{"type":["null","array"],"items":{"type":"string"}},"sub":{"type":["null","object"],"properties":{"a":{"type":"boolean"}},"required":["a"],"additionalProperties":false},"f":{"type":"number"},"m":{"type":"object","additionalProperties":{"type":"integer"}}},"required":["n"],"additionalProperties":false}`,
		`{"type":"object","properties":{"name":{"type":"string"},"n":{"type":"integer"}},"required":["name","n"]}`,
		`{"type":"array","items":{"type":["integer","object"],"properties":{"x":{"type":"null"}}}}`,
		`{"type":"object","properties":{"i":{"type":"integer","minimum":-9223372036854775808,"maximum":9223372036854775807},"f":{"type":"number","exclusiveMinimum":-340282356779733661637539395458142568448,"exclusiveMaximum":340282356779733661637539395458142568448},"d":{"type":"number","minimum":0.1,"maximum":0.3}}}`,
	}
	var vs []*validator
	for _, schema := range schemas {
		v, err := compileSchema("t", json.RawMessage(schema))
		if err != nil || v.quick == nil {
			f.Fatalf("schema %s: %v (quick %v)", schema, err, v != nil && v.quick != nil)
		}
		vs = append(vs, v)
	}
	for _, doc := range []string{`{"n":1,"sub":{"a":true},"m":{"x":2},"l":["a"]}`, `{"name":"a","n":-3}`, `[1,{"x":null},2.0]`, ` { "n" : 1 } `,
		`{"i":9223372036854775808,"f":3.4028235e38,"d":0.1}`, `{"i":-9223372036854775807,"f":-1e39,"d":0.30000000000000001}`} {
		f.Add(uint8(0), []byte(doc))
	}
	f.Fuzz(func(t *testing.T, which uint8, doc []byte) {
		if !json.Valid(doc) {
			return
		}
		v := vs[int(which)%len(vs)]
		if !v.quick.accepts(doc) {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.UseNumber()
		var d any
		if err := dec.Decode(&d); err != nil {
			t.Fatal(err)
		}
		if err := v.schema.Validate(d); err != nil {
			t.Fatalf("quick path accepts %s, the validator says %v", doc, err)
		}
	})
}

// TestQuickSchema_CompilesOnlyItsKeywords checks which schemas get a quick
// path: the keywords it knows, and nothing that could change validity.
func TestQuickSchema_CompilesOnlyItsKeywords(t *testing.T) {
	for schema, want := range map[string]bool{
		`{"type":"object","properties":{"a":{"type":"string","title":"A"}},"required":["a"]}`: true,
		`{"type":"array","items":{"type":"integer"}}`:                                         true,
		`{"type":"string","minLength":1}`:                                                     false,
		`{"type":"object","properties":{"a":{"$ref":"#/$defs/x"}},"$defs":{"x":{}}}`:          false,
		`{"type":"array","items":[{"type":"string"}]}`:                                        false,
		`{"type":"object","properties":{"a":{"enum":["x"]}}}`:                                 false,
		`{"type":"nonsense"}`:                        false,
		`{"type":"object","properties":{"a":false}}`: false,
	} {
		if got := compileQuick(json.RawMessage(schema)) != nil; got != want {
			t.Errorf("compileQuick(%s) != nil is %v, want %v", schema, got, want)
		}
	}
}

func BenchmarkValidate(b *testing.B) {
	v, err := compileSchema("noop", json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"},"n":{"type":"integer"}},"required":["name"]}`))
	if err != nil {
		b.Fatal(err)
	}
	// The schema NewTyped infers for struct{Name string; N int}: bounded.
	bounded, err := compileSchema("noop", json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"},"n":{"type":"integer","minimum":-9223372036854775808,"maximum":9223372036854775807}},"required":["name"]}`))
	if err != nil || bounded.quick == nil {
		b.Fatal(err, "or no quick path")
	}
	args := json.RawMessage(`{"name":"Ada","n":3}`)
	for _, c := range []struct {
		name  string
		quick bool
		v     *validator
	}{{"validator", false, v}, {"quick", true, v}, {"quick-bounded", true, bounded}} {
		quick := c.quick
		b.Run(c.name, func(b *testing.B) {
			v := *c.v
			if !quick {
				v.quick = nil
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.validate(args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
