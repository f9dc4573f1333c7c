package openai_test

import (
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
		m := modeltest.Must(openai.New(&openai.Options{BaseURL: srv.URL, Model: "test-model", HTTPClient: srv.Client(), MaxRetries: openai.NoRetries}))(t)
		return modeltest.Harness{Spec: m.Spec("model"), Requests: srv.Requests}
	})
}
