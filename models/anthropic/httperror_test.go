package anthropic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2/option"

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
	rg := newRig(t, anthropic.Options{APIKey: key}, modeltest.EchoKey(authenticationError))
	modeltest.WantKeyRedacted(t, rg.Ask("s1", userAsk), key)
}

// The password of a base URL with user info, which the client sends as
// basic auth, is not repeated when the server quotes it, plain or as the
// base64 of the Authorization header.
func TestAdapter_EchoedBasicAuthIsRedacted(t *testing.T) {
	rg := modeltest.NewRig(t, modeltest.EchoBasicAuth(authenticationError), func(url string, client *http.Client) actors.Spec {
		return modeltest.Must(anthropic.New(&anthropic.Options{BaseURL: modeltest.WithBasicAuth(url), HTTPClient: client, Model: "claude-sonnet-4-5", MaxRetries: anthropic.NoRetries}))(t).Spec("model")
	})
	modeltest.WantBasicAuthRedacted(t, rg.Ask("s1", userAsk))
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

// A key quoted in a page at the point where the error's quote of the
// body is cut is not repeated in part either.
func TestAdapter_KeyCutByTheQuoteIsRedacted(t *testing.T) {
	const key = "sk-ant-api03-secret-0123456789abcdef"
	rg := newRig(t, anthropic.Options{APIKey: key}, modeltest.EchoKeyAtClip())
	modeltest.WantNoKeyPart(t, rg.Ask("s1", userAsk), key)
}

// Only the path of a base URL loses its /v1: a server whose host is
// named v1 is still the one asked.
func TestAdapter_BaseURLHostNamedV1(t *testing.T) {
	got := make(chan string, 1)
	rg := modeltest.NewRig(t, func(n int, w http.ResponseWriter, r *http.Request, b map[string]json.RawMessage) {
		got <- r.Host + r.URL.Path
		modeltest.StreamBody(sse(messageStart(1, 0, 0), messageDelta("end_turn", 1), messageStop))(n, w, r, b)
	}, func(url string, client *http.Client) actors.Spec {
		addr := strings.TrimPrefix(url, "http://")
		transport := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr) // every host is the test server
		}}
		t.Cleanup(transport.CloseIdleConnections)
		client = &http.Client{Transport: transport}
		return modeltest.Must(anthropic.New(&anthropic.Options{BaseURL: "http://v1", HTTPClient: client, Model: "claude-sonnet-4-5", MaxRetries: anthropic.NoRetries}))(t).Spec("model")
	})
	if r := rg.Ask("s1", userAsk); r.Failed || len(got) != 1 {
		t.Fatalf("failed %v with %q; want the server named v1 asked", r.Failed, r.Error)
	}
	if where := <-got; where != "v1/v1/messages" {
		t.Fatalf("asked %q, want v1/v1/messages (host v1, path /v1/messages)", where)
	}
}

// The message of an error status, and of an error event in the stream,
// is told by its start, not all of it (a server may send a large one),
// and an API key it quotes is cut out, even across the clip.
func TestAdapter_LongErrorMessageIsClippedAndRedacted(t *testing.T) {
	const key = "sk-ant-api03-secret-0123456789"
	status := func(w http.ResponseWriter, message string) {
		anthropictest.WriteError(w, http.StatusBadRequest, "invalid_request_error", message)
	}
	inStream := func(w http.ResponseWriter, message string) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = fmt.Fprintf(w, "%sevent: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":%s}}\n\n",
			sse(messageStart(1, 0, 0), textStart(0), textDelta(0, "Hel")), anthropictest.Quote(message))
	}
	for want, write := range map[string]func(http.ResponseWriter, string){"HTTP 400": status, "error event in the stream: overloaded_error": inStream} {
		rg := newRig(t, anthropic.Options{APIKey: key, MaxRetries: anthropic.NoRetries}, modeltest.EchoKeyInLongMessage(write))
		modeltest.WantLongMessageClipped(t, rg.Ask("s1", userAsk), want, key)
	}
}

// Keys sent through RequestOptions (a key and a bearer token, a key in
// the query) are not repeated by the ERROR frame either.
func TestAdapter_KeysOfRequestOptionsAreRedacted(t *testing.T) {
	const key, token, query = "sk-ant-api03-other-0123456789", "bearer-secret-0123456789", "query-secret-0123456789"
	rg := newRig(t, anthropic.Options{RequestOptions: []option.RequestOption{
		option.WithHeader("X-Api-Key", key), option.WithAuthToken(token), option.WithQuery("key", query),
	}}, modeltest.EchoCredentials(authenticationError))
	modeltest.WantCredentialsRedacted(t, rg.Ask("s1", userAsk), key, token, query)
}

// A key shorter than 8 bytes is redacted too, where it stands as a word.
func TestAdapter_ShortKeyIsRedacted(t *testing.T) {
	const key = "k3y-9"
	rg := newRig(t, anthropic.Options{APIKey: key}, modeltest.EchoCredentials(authenticationError))
	modeltest.WantCredentialsRedacted(t, rg.Ask("s1", userAsk), key)
}

// A request that fails without a response names its URL: without the
// query, where keys may be.
func TestAdapter_FailedRequestURLHasNoQuery(t *testing.T) {
	const query = "query-secret-0123456789"
	rg := newRig(t, anthropic.Options{RequestOptions: []option.RequestOption{option.WithQuery("key", query)}}, modeltest.HangUp())
	modeltest.WantURLWithoutCredentials(t, rg.Ask("s1", userAsk), "/v1/messages", query)
}

// authenticationError writes the API's error for a key it refuses.
func authenticationError(w http.ResponseWriter, message string) {
	anthropictest.WriteError(w, http.StatusUnauthorized, "authentication_error", message)
}

// A credential the HTTP client's transport adds below the SDK (an OAuth2
// transport's bearer token) is not repeated either when the server
// quotes it: it is redacted as it went on the wire.
func TestAdapter_CredentialOfTheTransportIsRedacted(t *testing.T) {
	const token = "oauth-token-0123456789"
	rg := modeltest.NewRig(t, modeltest.EchoCredentials(authenticationError), func(url string, client *http.Client) actors.Spec {
		return adapter(t, anthropic.Options{})(url, &http.Client{Transport: modeltest.TokenTransport(client.Transport, token)})
	})
	modeltest.WantCredentialsRedacted(t, rg.Ask("s1", userAsk), token)
}

// The META events of a resilience.Transport's retries say why the
// attempt failed without the credentials that error quoted: the API key,
// and a token the transport below the SDK added.
func TestAdapter_RetryEventsAreRedacted(t *testing.T) {
	withKey := func(key string) func(string, *http.Client) actors.Spec {
		return adapter(t, anthropic.Options{APIKey: key, MaxRetries: anthropic.NoRetries})
	}
	modeltest.CheckRetriesRedacted(t, sse(messageStart(1, 0, 0), textStart(0), textDelta(0, "Hi"), blockStop(0), messageDelta("end_turn", 1), messageStop), withKey, adapter(t, anthropic.Options{MaxRetries: anthropic.NoRetries}))
}

// A request the server redirects to another origin is refused, and not
// retried: the SDK retries a request that failed without a response, but
// the refusal is permanent, and a retry would only send the prompt to the
// server again.
func TestAdapter_RefusedRedirectIsNotRetried(t *testing.T) {
	for _, status := range []int{http.StatusFound, http.StatusTemporaryRedirect} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			rg := newRig(t, anthropic.Options{MaxRetries: 2}, modeltest.RedirectAway(status))
			modeltest.WantRedirectRefusedOnce(t, rg, rg.Ask("s1", userAsk))
		})
	}
}

// A request the server redirects on its own origin with 301, 302 or
// 303 is refused, and not retried: http.Client would send it on as a
// GET without its body, the prompt, and read what answers there (a
// valid-looking reply) as the model's. 307 and 308 keep the method and
// the body, and are followed.
func TestAdapter_SameOriginRedirectThatDropsThePrompt(t *testing.T) {
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			rg := newRig(t, anthropic.Options{MaxRetries: 2}, modeltest.RedirectHere(status, sse(messageStart(1, 0, 0), textStart(0), textDelta(0, "Moved in"), blockStop(0), messageDelta("end_turn", 1), messageStop)))
			r := rg.Ask("s1", userAsk)
			if status == http.StatusTemporaryRedirect || status == http.StatusPermanentRedirect {
				modeltest.WantRedirectHereFollowed(t, rg, r, "/v1/messages", "Moved in")
				return
			}
			modeltest.WantRedirectHereRefused(t, rg, r, status, "/v1/messages")
		})
	}
}

// A request the server redirects in a loop on its own origin is stopped
// after 10 redirects, and not retried: the loop would stop the retry as
// it stopped the first attempt, after the prompt went to the server 10
// times more.
func TestAdapter_RedirectLoopIsNotRetried(t *testing.T) {
	rg := newRig(t, anthropic.Options{MaxRetries: 2}, modeltest.RedirectLoop())
	modeltest.WantRedirectLoopStoppedOnce(t, rg, rg.Ask("s1", userAsk))
}
