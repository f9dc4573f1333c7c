package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/mcp"
	"github.com/polyweave/polyweave-go/tools"
)

// TestServer_HugeResultIsAnAnswer: a tool whose result is larger than a
// client can take in one JSON-RPC frame (go-sdk's stdio and in-memory
// transports refuse frames over 16 MiB, mcp.Import's stdio client among
// them) must not cost the client its session: the call is answered with
// an isError result naming the size and the limit, and the next call on
// the same session still works.
func TestServer_HugeResultIsAnAnswer(t *testing.T) {
	ts := []*tools.Tool{
		tools.MustNew(tools.Definition{Name: "huge", Handler: func(context.Context, json.RawMessage) (any, error) {
			return strings.Repeat("x", 20<<20), nil
		}}),
		tools.MustNew(tools.Definition{Name: "small", Handler: func(context.Context, json.RawMessage) (any, error) {
			return "ok", nil
		}}),
	}
	cs := serve(t, ts, nil, nil)
	res := callTool(t, cs, "huge", map[string]any{})
	t.Logf("huge: isError %v, %d bytes of text", res.IsError, len(text(res)))
	if limit := fmt.Sprintf("limit %d", mcp.DefaultMaxResultBytes); !res.IsError || !strings.Contains(text(res), "too large") || !strings.Contains(text(res), limit) {
		t.Errorf("huge: isError %v, %.200q; want an error result saying it is too large, with %q", res.IsError, text(res), limit)
	}
	if res := callTool(t, cs, "small", map[string]any{}); res.IsError || text(res) != "ok" {
		t.Fatalf("small after huge: %s", text(res))
	}
}

// TestServer_MaxResultBytes: the limit is on the result as sent, where
// an object counts twice (its text and its structuredContent).
func TestServer_MaxResultBytes(t *testing.T) {
	object := func(n int) tools.HandlerFunc {
		return func(context.Context, json.RawMessage) (any, error) {
			return map[string]string{"s": strings.Repeat("y", n)}, nil
		}
	}
	ts := []*tools.Tool{
		tools.MustNew(tools.Definition{Name: "fits", Handler: object(1500)}),
		tools.MustNew(tools.Definition{Name: "twice", Handler: object(2500)}),
	}
	cs := serve(t, ts, &mcp.ServerOptions{MaxResultBytes: 4096}, nil)
	if res := callTool(t, cs, "fits", map[string]any{}); res.IsError || res.StructuredContent == nil {
		t.Errorf("fits: isError %v, %.100q", res.IsError, text(res))
	}
	res := callTool(t, cs, "twice", map[string]any{})
	if !res.IsError || !strings.Contains(text(res), "limit 4096") {
		t.Errorf("twice: isError %v, %.200q; want an error result with the limit", res.IsError, text(res))
	}
}
