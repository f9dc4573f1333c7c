package tools

import (
	"context"
	"encoding/json"
	"testing"
)

// TestToolsParam_SharedByOneToolSet: stages built one after the other
// from the same tools share one encoding of them; another set of tools
// gets its own, and the shared one stays as it was.
func TestToolsParam_SharedByOneToolSet(t *testing.T) {
	mk := func(name string) *Tool {
		return MustNew(Definition{Name: name, Handler: func(context.Context, json.RawMessage) (any, error) { return nil, nil }})
	}
	a, b := mk("a"), mk("b")
	first := toolsParam(nil, []*Tool{a, b})
	again := toolsParam(nil, []*Tool{a, b}) // another slice, the same tools
	if &first[0] != &again[0] {
		t.Error("the same tools were encoded twice")
	}
	other := toolsParam(nil, []*Tool{b})
	if string(other) != string(FunctionList([]*Tool{b})) {
		t.Errorf("other tools: %s", other)
	}
	if string(first) != string(FunctionList([]*Tool{a, b})) {
		t.Errorf("the first encoding changed: %s", first)
	}
	if got := toolsParam(json.RawMessage(`[]`), []*Tool{a}); string(got) != `[]` {
		t.Errorf("explicit param: %s", got)
	}
	if got := toolsParam(nil, nil); got != nil {
		t.Errorf("no tools: %s", got)
	}
}
