package tools_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/tools"
)

// askAll decides as approval.AskAll does: every call that is not
// read-only waits for a person.
func askAll(c tools.ApprovalCall) (tools.Verdict, string) {
	if c.ReadOnly() {
		return tools.VerdictRun, ""
	}
	return tools.VerdictAsk, c.Tool.Name + " changes things"
}

// TestCapabilities_UndeclaredIsNotReadOnly: a tool whose author gave no
// Capabilities describes the seed's default ["read"], yet no safety
// decision takes it for read-only: the approval policies ask before it
// runs. A tool declaring ["read"] is read-only and runs.
func TestCapabilities_UndeclaredIsNotReadOnly(t *testing.T) {
	undeclared := tools.MustNew(tools.Definition{Name: "delete_everything"})
	declared := tools.MustNew(tools.Definition{Name: "peek", Capabilities: []string{"read"}})

	d := undeclared.Description()
	if !slices.Equal(d.Capabilities, []string{tools.DefaultCapability}) {
		t.Errorf("DESCRIBE of a tool without capabilities shows %v, want the default [read]", d.Capabilities)
	}
	if payload, err := json.Marshal(d); err != nil || !strings.Contains(string(payload), `"capabilities":["read"]`) ||
		strings.Contains(strings.ToLower(string(payload)), "declared") {
		t.Errorf("DESCRIBE payload %s (%v), want the seed's fields with capabilities [read]", payload, err)
	}
	if d.ReadOnly() || d.CapabilitiesDeclared() {
		t.Errorf("a tool without capabilities: read-only %v, declared %v; want neither", d.ReadOnly(), d.CapabilitiesDeclared())
	}
	if rd := declared.Description(); !rd.ReadOnly() || !rd.CapabilitiesDeclared() {
		t.Errorf("a tool declaring [read]: read-only %v, declared %v; want both", rd.ReadOnly(), rd.CapabilitiesDeclared())
	}

	for _, p := range []struct {
		name   string
		policy tools.ApprovalPolicy
	}{{"DefaultApprovalPolicy", tools.DefaultApprovalPolicy}, {"ask all", askAll}} {
		call := tools.ApprovalCall{StreamID: "s", ToolCallID: "c1", Tool: undeclared.Description(), Arguments: json.RawMessage(`{}`)}
		if call.ReadOnly() {
			t.Errorf("%s: the call of a tool without capabilities is read-only", p.name)
		}
		if v, why := p.policy(call); v != tools.VerdictAsk || !strings.Contains(why, "delete_everything") {
			t.Errorf("%s on a tool without capabilities: %v %q, want ask naming it", p.name, v, why)
		}
		call.Tool = declared.Description()
		if v, why := p.policy(call); v != tools.VerdictRun {
			t.Errorf("%s on a tool declaring [read]: %v %q, want run", p.name, v, why)
		}
	}
}

// TestCapabilities_UndeclaredSurvivesRewrapping: a tool rebuilt from the
// Definition of one that declared no capabilities (a handler wrapped,
// as hosts do) still declares none, though the Definition shows the
// default; a capability set on that Definition is a declaration.
func TestCapabilities_UndeclaredSurvivesRewrapping(t *testing.T) {
	def := tools.MustNew(tools.Definition{Name: "delete_everything"}).Definition()
	if !slices.Equal(def.Capabilities, []string{"read"}) {
		t.Errorf("Definition shows capabilities %v, want the default [read]", def.Capabilities)
	}
	if d := tools.MustNew(def).Description(); d.ReadOnly() || d.CapabilitiesDeclared() {
		t.Errorf("rewrapped tool: read-only %v, declared %v; want neither", d.ReadOnly(), d.CapabilitiesDeclared())
	}
	copied := def // a copy of the Definition, its Capabilities untouched
	if d := tools.MustNew(copied).Description(); d.ReadOnly() || d.CapabilitiesDeclared() {
		t.Errorf("tool from a copy of the Definition: read-only %v, declared %v; want neither", d.ReadOnly(), d.CapabilitiesDeclared())
	}
	// Setting Capabilities declares them, [read] included.
	def.Capabilities = []string{"read"}
	if d := tools.MustNew(def).Description(); !d.ReadOnly() || !d.CapabilitiesDeclared() {
		t.Errorf("rewrapped tool given [read]: read-only %v, declared %v; want both", d.ReadOnly(), d.CapabilitiesDeclared())
	}
	def.Capabilities = []string{"write"}
	if d := tools.MustNew(def).Description(); d.ReadOnly() || !d.CapabilitiesDeclared() {
		t.Errorf("rewrapped tool given [write]: read-only %v, declared %v; want declared, not read-only", d.ReadOnly(), d.CapabilitiesDeclared())
	}
	read := tools.MustNew(tools.Definition{Name: "peek", Capabilities: []string{"read"}}).Definition()
	if d := tools.MustNew(read).Description(); !d.ReadOnly() {
		t.Error("rewrapped tool declaring [read] is not read-only")
	}
}

// TestCapabilities_DescriptionFromElsewhereIsDeclared: a Description
// decoded from a DESCRIBE payload or written by hand states its
// capabilities, so they count as declared; one with none is not
// read-only.
func TestCapabilities_DescriptionFromElsewhereIsDeclared(t *testing.T) {
	var d tools.Description
	if err := json.Unmarshal([]byte(`{"name":"peek","capabilities":["read"],"reversible":true}`), &d); err != nil {
		t.Fatal(err)
	}
	if !d.CapabilitiesDeclared() || !d.ReadOnly() {
		t.Errorf("decoded description: declared %v, read-only %v; want both", d.CapabilitiesDeclared(), d.ReadOnly())
	}
	if (tools.Description{Name: "x"}).ReadOnly() {
		t.Error("a description without capabilities is read-only")
	}
	if !(tools.Description{Capabilities: []string{"read", "read"}}).ReadOnly() || (tools.Description{Capabilities: []string{"read", "write"}}).ReadOnly() {
		t.Error("read-only is wrong for [read read] or [read write]")
	}
}
