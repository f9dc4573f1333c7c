package anthropic_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/models/anthropic"
	"github.com/polyweave/polyweave-go/models/anthropic/anthropictest"
	"github.com/polyweave/polyweave-go/models/modeltest"
)

// An error status whose body is not the API's error (a proxy's page) is
// told by its status, the request and the quoted start of the body: not
// the whole page, nothing that is not UTF-8, and not the password of a
// base URL with user info.
func TestAdapter_GatewayErrorPageIsDescribed(t *testing.T) {
	rg := modeltest.NewRig(t, modeltest.GatewayErrorPage(), func(url string, client *http.Client) actors.Spec {
		url = strings.Replace(url, "://", "://user:hunter2@", 1)
		return modeltest.Must(anthropic.New(&anthropic.Options{BaseURL: url, HTTPClient: client, Model: "claude-sonnet-4-5", MaxRetries: anthropic.NoRetries}))(t).Spec("model")
	})
	modeltest.WantStatusDescribed(t, rg.Ask("s1", userAsk), "/v1/messages", "hunter2")
}

// An API key the server quotes in its error message is not repeated in
// the ERROR frame.
func TestAdapter_EchoedKeyIsRedacted(t *testing.T) {
	const key = "sk-ant-api03-secret-0123456789"
	rg := newRig(t, anthropic.Options{APIKey: key}, modeltest.EchoKey(func(w http.ResponseWriter, message string) {
		anthropictest.WriteError(w, http.StatusUnauthorized, "authentication_error", message)
	}))
	modeltest.WantKeyRedacted(t, rg.Ask("s1", userAsk), key)
}

// A base URL ending in /v1 (as the API reference writes the endpoint,
// and as OpenAI-compatible servers want it) reaches /v1/messages, not
// /v1/v1/messages.
func TestAdapter_BaseURLWithOrWithoutV1(t *testing.T) {
	for _, suffix := range []string{"", "/", "/v1", "/v1/"} {
		paths := make(chan string, 1)
		rg := modeltest.NewRig(t, func(n int, w http.ResponseWriter, r *http.Request, b map[string]json.RawMessage) {
			paths <- r.URL.Path
			modeltest.StreamBody(sse(messageStart(1, 0, 0), messageDelta("end_turn", 1), messageStop))(n, w, r, b)
		}, func(url string, client *http.Client) actors.Spec {
			return modeltest.Must(anthropic.New(&anthropic.Options{BaseURL: url + suffix, HTTPClient: client, Model: "claude-sonnet-4-5", MaxRetries: anthropic.NoRetries}))(t).Spec("model")
		})
		if r, path := rg.Ask("s1", userAsk), <-paths; r.Failed || path != "/v1/messages" {
			t.Errorf("base URL ending %q: path %q, failed %v %q; want /v1/messages", suffix, path, r.Failed, r.Error)
		}
	}
}
