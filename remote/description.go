package remote

import (
	"encoding/json"
	"slices"

	"github.com/polyweave/polyweave-go/tools"
)

// description is the payload of a DESCRIPTION frame a node sends: the
// tool's [tools.Description] (its own DESCRIBE payload) and, only for a
// tool whose author declared no capabilities, "capabilitiesDeclared":
// false. Such a tool is described with the default ["read"] but is not
// read-only ([tools.Description.ReadOnly]); without the key the host
// would take it as a reader and run it unasked. Every other tool's
// payload is its DESCRIBE payload unchanged, and a peer that does not
// know the key ignores it (decoding JSON, unknown keys are skipped): a
// client before it takes such a tool as read-only, as it did; a node
// before it sends no key, and its tools count as declared.
type description struct {
	tools.Description
	Declared *bool `json:"capabilitiesDeclared,omitempty"`
}

// encodeDescription is the DESCRIPTION payload of t.
func encodeDescription(t *tools.Tool) ([]byte, error) {
	d := description{Description: t.Description()}
	if !d.Description.CapabilitiesDeclared() {
		d.Declared = new(bool)
	}
	return json.Marshal(d)
}

// decodeDescription reads a DESCRIPTION payload. caps are the
// capabilities to make the host's tool with: nil (so that it declares
// none, as on the node) for a tool the node says declared none and whose
// capabilities are the default; otherwise the node's.
func decodeDescription(payload []byte) (d tools.Description, caps []string, err error) {
	var wire description
	if err := json.Unmarshal(payload, &wire); err != nil {
		return tools.Description{}, nil, err
	}
	d, caps = wire.Description, wire.Capabilities
	if wire.Declared != nil && !*wire.Declared && slices.Equal(caps, []string{tools.DefaultCapability}) {
		caps = nil
	}
	return d, caps, nil
}
