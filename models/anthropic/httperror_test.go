package anthropic_test

import (
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
