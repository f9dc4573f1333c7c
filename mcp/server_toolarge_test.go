package mcp_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/mcp"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// TestServer_ResultTooLargeHasItsKind: the isError result that replaces
// a result over MaxResultBytes carries the failure kind
// tools.FailureTooLarge in _meta, as remote's answer to a frame over its
// limit does, and an import takes that kind back: the tool ran, and its
// result's size says nothing of its health.
func TestServer_ResultTooLargeHasItsKind(t *testing.T) {
	big := tools.MustNew(tools.Definition{Name: "big", Handler: func(context.Context, json.RawMessage) (any, error) {
		return strings.Repeat("x", 8<<10), nil
	}})
	opts := &mcp.ServerOptions{MaxResultBytes: 4 << 10}
	res := callTool(t, serve(t, []*tools.Tool{big}, opts, nil), "big", map[string]any{})
	if k := res.Meta[mcp.FailureKindMeta]; !res.IsError || k != string(tools.FailureTooLarge) {
		t.Errorf("result over MaxResultBytes: isError %v, kind %v, %.200q; want an error result of kind %q", res.IsError, k, text(res), tools.FailureTooLarge)
	}

	rt := actorstest.NewRuntime(t, nil)
	srv, err := mcp.NewServer(rt, &mcp.ServerOptions{Tools: []*tools.Tool{big}, MaxResultBytes: opts.MaxResultBytes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close(context.Background()) })
	h, err := srv.ListenHTTP(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) }) // after the import's close
	im := imported(t, rt, &mcp.ImportOptions{URL: h.URL()})
	got := runLoop(t, rt, im.Tools(), scripted.Turn{ToolCalls: []scripted.ToolCall{{ID: "big", Name: "big"}}}, scripted.Turn{Text: "done"})
	if f := got["big"]; tools.KindOf(f) != tools.FailureTooLarge || !strings.Contains(string(f.GetPayload()), "too large") {
		t.Errorf("result over the server's MaxResultBytes through an import: kind %q, %v; want an error result of kind %q", tools.KindOf(f), f, tools.FailureTooLarge)
	}
}
