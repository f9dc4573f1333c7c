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
				dec := json.NewDecoder(bytes.NewReader([]byte(doc)))
				dec.UseNumber()
				var d any
				if err := dec.Decode(&d); err != nil {
					t.Fatal(err)
				}
				valid := v.schema.Validate(d) == nil
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

// FuzzQuickSchema: on any valid JSON, the quick path reading the bytes
// in place never panics and never accepts what the validator rejects.
func FuzzQuickSchema(f *testing.F) {
	schemas := []string{
		`{"type":"object","properties":{"n":{"type":"integer"},"s":{"type":"string"},"l":{"type":["null","array"],"items":{"type":"string"}},"sub":{"type":["null","object"],"properties":{"a":{"type":"boolean"}},"required":["a"],"additionalProperties":false},"f":{"type":"number"},"m":{"type":"object","additionalProperties":{"type":"integer"}}},"required":["n"],"additionalProperties":false}`,
		`{"type":"object","properties":{"name":{"type":"string"},"n":{"type":"integer"}},"required":["name","n"]}`,
		`{"type":"array","items":{"type":["integer","object"],"properties":{"x":{"type":"null"}}}}`,
	}
	var vs []*validator
	for _, schema := range schemas {
		v, err := compileSchema("t", json.RawMessage(schema))
		if err != nil || v.quick == nil {
			f.Fatalf("schema %s: %v (quick %v)", schema, err, v != nil && v.quick != nil)
		}
		vs = append(vs, v)
	}
	for _, doc := range []string{`{"n":1,"sub":{"a":true},"m":{"x":2},"l":["a"]}`, `{"name":"a","n":-3}`, `[1,{"x":null},2.0]`, ` { "n" : 1 } `} {
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
	args := json.RawMessage(`{"name":"Ada","n":3}`)
	for _, quick := range []bool{false, true} {
		b.Run(map[bool]string{false: "validator", true: "quick"}[quick], func(b *testing.B) {
			v := *v
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
