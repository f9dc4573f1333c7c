package mcp_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/mcp"
	"github.com/polyweave/polyweave-go/tools"
)

// TestServer_HugeResultOfEscapedTextIsAnAnswer: an object result whose
// text needs escaping ("<", ">" and "&" reach the wire as \u003c and the
// like: go-sdk's content encodes them so, in the text and in
// structuredContent alike) grows 12 times on the wire. An object of a
// limit's eighth in "<" is a result half again the limit, which a
// server that assumed less growth let through unmeasured: at the
// default limit such a result is a frame over go-sdk's line limit, and
// the in-memory or stdio client ends the session, the very thing
// MaxResultBytes is there to prevent (a small limit shows the same
// check at a small cost). It must be an isError answer, and the next
// call must still work.
func TestServer_HugeResultOfEscapedTextIsAnAnswer(t *testing.T) {
	const limit = 64 << 10
	object := func(c string) tools.HandlerFunc {
		return func(context.Context, json.RawMessage) (any, error) {
			return map[string]string{"s": strings.Repeat(c, limit/8)}, nil
		}
	}
	ts := []*tools.Tool{
		tools.MustNew(tools.Definition{Name: "lt", Handler: object("<")}),
		tools.MustNew(tools.Definition{Name: "gt", Handler: object(">")}),
		tools.MustNew(tools.Definition{Name: "amp", Handler: object("&")}),
		tools.MustNew(tools.Definition{Name: "small", Handler: func(context.Context, json.RawMessage) (any, error) {
			return "ok", nil
		}}),
	}
	cs := serve(t, ts, &mcp.ServerOptions{MaxResultBytes: limit}, nil)
	for _, name := range []string{"lt", "gt", "amp"} {
		res := callTool(t, cs, name, map[string]any{})
		if !res.IsError || !strings.Contains(text(res), "too large") {
			t.Errorf("%s: isError %v, %d bytes of text; want an error result saying it is too large", name, res.IsError, len(text(res)))
		}
	}
	if res := callTool(t, cs, "small", map[string]any{}); res.IsError || text(res) != "ok" {
		t.Fatalf("small after the escaped ones: %s", text(res))
	}
}
