package mcp_test

import (
	"context"
	"net/http"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/mcp"
	"github.com/polyweave/polyweave-go/tools"
)

// TestServer_UndeclaredCapabilitiesAreNotReadOnly: a tool whose author
// declared no capabilities is not advertised read-only (a client may run
// read-only tools without asking), nor as harmless: its destructive hint
// is left to MCP's default (destructive). A tool declaring ["read"] is
// read-only. Imported back, each keeps what it was advertised as.
func TestServer_UndeclaredCapabilitiesAreNotReadOnly(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	ts := []*tools.Tool{
		tools.MustNew(tools.Definition{Name: "delete_everything"}),
		tools.MustNew(tools.Definition{Name: "peek", Capabilities: []string{"read"}}),
	}
	srv, err := mcp.NewServer(rt, &mcp.ServerOptions{Tools: ts})
	if err != nil {
		t.Fatal(err)
	}
	h, err := srv.ListenHTTP(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(context.Background()); err != nil {
			t.Error(err)
		}
		if err := srv.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})

	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	defer hc.CloseIdleConnections()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).
		Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: h.URL(), HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*sdk.Tool{}
	for _, tl := range list.Tools {
		byName[tl.Name] = tl
	}
	undeclared, peek := byName["delete_everything"], byName["peek"]
	if undeclared == nil || peek == nil {
		t.Fatalf("tools/list: %+v", list.Tools)
	}
	if a := undeclared.Annotations; a == nil || a.ReadOnlyHint || (a.DestructiveHint != nil && !*a.DestructiveHint) {
		t.Errorf("a tool without capabilities is advertised %+v; want neither read-only nor non-destructive", a)
	}
	if a := peek.Annotations; a == nil || !a.ReadOnlyHint {
		t.Errorf("a tool declaring [read] is advertised %+v; want read-only", a)
	}

	im, err := mcp.Import(context.Background(), rt, &mcp.ImportOptions{URL: h.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close(context.Background())
	for _, tl := range im.Tools() {
		d := tl.Description()
		if want := tl.Name() == "peek"; d.ReadOnly() != want || !d.CapabilitiesDeclared() {
			t.Errorf("imported %s: read-only %v, declared %v; want read-only %v, declared", tl.Name(), d.ReadOnly(), d.CapabilitiesDeclared(), want)
		}
		if tl.Name() == "delete_everything" && d.Reversible {
			t.Errorf("imported %s is reversible; a tool advertised destructive is not", tl.Name())
		}
	}
	if len(im.Tools()) != 2 {
		t.Errorf("imported %d tools, want 2", len(im.Tools()))
	}
}
