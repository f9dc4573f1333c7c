package remote

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/polyweave/polyweave-go/tools"
)

// A declared tool's DESCRIPTION payload is its DESCRIBE payload; an
// undeclared one's adds only "capabilitiesDeclared":false, which a peer
// that does not know it ignores.
func TestDescriptionPayload(t *testing.T) {
	reader := tools.MustNew(tools.Definition{Name: "reader", Capabilities: []string{"read"}})
	plain := tools.MustNew(tools.Definition{Name: "plain"})
	for _, tool := range []*tools.Tool{reader, plain} {
		own, _ := json.Marshal(tool.Description())
		sent, err := encodeDescription(tool)
		if err != nil {
			t.Fatal(err)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(sent, &fields); err != nil {
			t.Fatal(err)
		}
		declared, has := fields["capabilitiesDeclared"]
		switch {
		case tool == reader && string(sent) != string(own):
			t.Errorf("declared tool sent %s, want its DESCRIBE payload %s", sent, own)
		case tool == plain && (!has || string(declared) != "false"):
			t.Errorf("undeclared tool sent %s, want capabilitiesDeclared false", sent)
		}
		var old tools.Description // as a client that does not know the key reads it
		if err := json.Unmarshal(sent, &old); err != nil || old.Name != tool.Name() {
			t.Errorf("%s: a plain Description does not read %s: %v", tool.Name(), sent, err)
		}
	}
}

func TestDecodeDescription(t *testing.T) {
	cases := []struct {
		payload string
		want    []string
	}{
		{`{"name":"a","capabilities":["read"]}`, []string{"read"}},                                // a node without the key
		{`{"name":"a","capabilities":["read"],"capabilitiesDeclared":true}`, []string{"read"}},    // declared
		{`{"name":"a","capabilities":["read"],"capabilitiesDeclared":false}`, nil},                // the default
		{`{"name":"a","capabilities":["write"],"capabilitiesDeclared":false}`, []string{"write"}}, // not the default: as given
	}
	for _, c := range cases {
		d, caps, err := decodeDescription([]byte(c.payload))
		if err != nil || d.Name != "a" || !slices.Equal(caps, c.want) || (caps == nil) != (c.want == nil) {
			t.Errorf("%s: name %q, capabilities %q (err %v), want %q", c.payload, d.Name, caps, err, c.want)
		}
	}
	if _, _, err := decodeDescription([]byte(`{"name":`)); err == nil {
		t.Error("a truncated payload decoded")
	}
}
