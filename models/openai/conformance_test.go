package openai_test

import (
	"encoding/json"
	"testing"

	"github.com/polyweave/polyweave-go/models/modeltest"
	"github.com/polyweave/polyweave-go/models/openai"
	"github.com/polyweave/polyweave-go/models/openai/openaitest"
	"github.com/polyweave/polyweave-go/models/scripted"
)

func TestConformance(t *testing.T) {
	modeltest.Run(t, func(t *testing.T, turns []scripted.Turn) modeltest.Harness {
		srv := openaitest.NewServer(turns)
		t.Cleanup(srv.Close)
		m, err := openai.New(&openai.Options{BaseURL: srv.URL, Model: "test-model", HTTPClient: srv.Client(), MaxRetries: openai.NoRetries})
		if err != nil {
			t.Fatal(err)
		}
		return modeltest.Harness{Spec: m.Spec("model"), Requests: func() []map[string]json.RawMessage { return srv.Requests() }}
	})
}
