package scripted_test

import (
	"encoding/json"
	"testing"

	"github.com/polyweave/polyweave-go/models/modeltest"
	"github.com/polyweave/polyweave-go/models/scripted"
)

func TestConformance(t *testing.T) {
	modeltest.Run(t, func(t *testing.T, turns []scripted.Turn) modeltest.Harness {
		m, err := scripted.New(scripted.Script{Turns: turns}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return modeltest.Harness{Spec: m.Spec("model"), Requests: func() []map[string]json.RawMessage {
			var out []map[string]json.RawMessage
			for _, rec := range m.Requests() {
				fields := map[string]json.RawMessage{}
				for _, p := range rec.Request.Params {
					fields[p.Name] = p.Value
				}
				out = append(out, fields)
			}
			return out
		}}
	})
}
