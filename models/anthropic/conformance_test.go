package anthropic_test

import (
	"encoding/json"
	"testing"

	"github.com/polyweave/polyweave-go/models/anthropic"
	"github.com/polyweave/polyweave-go/models/anthropic/anthropictest"
	"github.com/polyweave/polyweave-go/models/modeltest"
	"github.com/polyweave/polyweave-go/models/scripted"
)

func TestConformance(t *testing.T) {
	modeltest.Run(t, func(t *testing.T, turns []scripted.Turn) modeltest.Harness {
		srv := anthropictest.NewServer(turns)
		t.Cleanup(srv.Close)
		m := modeltest.Must(anthropic.New(&anthropic.Options{BaseURL: srv.URL, Model: "claude-test", HTTPClient: srv.Client(), MaxRetries: anthropic.NoRetries}))(t)
		return modeltest.Harness{Spec: m.Spec("model"), Requests: func() []map[string]json.RawMessage {
			var out []map[string]json.RawMessage
			for _, body := range srv.Requests() {
				view, err := anthropictest.ChatView(body)
				if err != nil {
					t.Errorf("request the server received: %v", err)
				}
				out = append(out, view)
			}
			return out
		}}
	})
}
