package openai_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/option"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/modeltest"
	"github.com/polyweave/polyweave-go/models/openai"
	"github.com/polyweave/polyweave-go/models/resilience"
)

// An error status whose body is not the API's error (a proxy's page) is
// told by its status, the request and the quoted start of the body: not
// the whole page, nothing that is not UTF-8, and not the password of a
// base URL with user info.
func TestAdapter_GatewayErrorPageIsDescribed(t *testing.T) {
	rg := modeltest.NewRig(t, modeltest.GatewayErrorPage(), func(url string, client *http.Client) actors.Spec {
		url = strings.Replace(url, "://", "://user:hunter2@", 1) + "/v1"
		return modeltest.Must(openai.New(&openai.Options{BaseURL: url, HTTPClient: client, Model: "gpt-4o-mini", MaxRetries: openai.NoRetries}))(t).Spec("model")
	})
	modeltest.WantStatusDescribed(t, rg.Ask("s1", userAsk), "/v1/chat/completions", "hunter2")
}

// A base URL without /v1 against a server that serves only /v1 (Ollama,
// vLLM) gets a 404 whose error says which URL was asked for, so that the
// mistake shows, and what the server answered.
func TestAdapter_NotFoundNamesTheURL(t *testing.T) {
	rg := newRig(t, openai.Options{MaxRetries: openai.NoRetries}, func(_ int, w http.ResponseWriter, r *http.Request, _ map[string]json.RawMessage) {
		http.NotFound(w, r)
	})
	r := rg.Ask("s1", userAsk)
	if !r.Failed || !containsAll(r.Error, "HTTP 404", "POST "+rg.URL+"/v1/chat/completions", "404 page not found") || r.ErrorKind != models.FailurePermanent {
		t.Fatalf("failed %v with %q of kind %q, want the status, the URL and the body, permanent", r.Failed, r.Error, r.ErrorKind)
	}
}

// An API key the server quotes in its error message is not repeated in
// the ERROR frame.
func TestAdapter_EchoedKeyIsRedacted(t *testing.T) {
	const key = "sk-proj-secret-0123456789"
	rg := newRig(t, openai.Options{APIKey: key, MaxRetries: openai.NoRetries}, modeltest.EchoKey(func(w http.ResponseWriter, message string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": message, "type": "invalid_request_error", "code": "invalid_api_key"}})
		_, _ = w.Write(b)
	}))
	modeltest.WantKeyRedacted(t, rg.Ask("s1", userAsk), key)
}

// A data line that is not JSON ends the answer with an error quoting
// it, so that a server's plain-text error shows.
func TestAdapter_ChunkNotJSONIsQuoted(t *testing.T) {
	body := sse(content("Hel"), "event: error\ndata: upstream model crashed\n\n")
	rg := newRig(t, openai.Options{MaxRetries: openai.NoRetries}, modeltest.StreamBody(body))
	r := rg.Ask("s1", userAsk)
	modeltest.WantFailed(t, r, "decode chunk", `"upstream model crashed"`)
	if r.Text != "Hel" {
		t.Fatalf("text %q, want the text streamed before the bad chunk", r.Text)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// The password of a base URL with user info, which the client sends as
// basic auth, is not repeated when the server quotes it, plain or as the
// base64 of the Authorization header.
func TestAdapter_EchoedBasicAuthIsRedacted(t *testing.T) {
	rg := modeltest.NewRig(t, modeltest.EchoBasicAuth(func(w http.ResponseWriter, message string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": message, "type": "invalid_request_error"}})
		_, _ = w.Write(b)
	}), func(url string, client *http.Client) actors.Spec {
		return modeltest.Must(openai.New(&openai.Options{BaseURL: modeltest.WithBasicAuth(url) + "/v1", HTTPClient: client, Model: "gpt-4o-mini", MaxRetries: openai.NoRetries}))(t).Spec("model")
	})
	modeltest.WantBasicAuthRedacted(t, rg.Ask("s1", userAsk))
}

// A key quoted in a page at the point where the error's quote of the
// body is cut is not repeated in part either.
func TestAdapter_KeyCutByTheQuoteIsRedacted(t *testing.T) {
	const key = "sk-proj-secret-0123456789abcdef"
	rg := newRig(t, openai.Options{APIKey: key, MaxRetries: openai.NoRetries}, modeltest.EchoKeyAtClip())
	modeltest.WantNoKeyPart(t, rg.Ask("s1", userAsk), key)
}

// An error object without a message inside the stream is told by the
// quoted start of the object, not all of it (a server may send a large
// one), and an API key it quotes is cut out, even across the clip.
func TestAdapter_ServerErrorWithoutMessageIsClippedAndRedacted(t *testing.T) {
	const key = "sk-proj-secret-0123456789abcdef"
	rg := newRig(t, openai.Options{APIKey: key, MaxRetries: openai.NoRetries}, func(_ int, w http.ResponseWriter, r *http.Request, _ map[string]json.RawMessage) {
		echoed := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		// The key starts 190 bytes into the object, across a quote of 200.
		object := `{"detail":"` + strings.Repeat("-", 179) + echoed + strings.Repeat(" trace", 20000) + `"}`
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, sse(content("Hel"), "data: {\"error\":"+object+"}\n\n"))
	})
	r := rg.Ask("s1", userAsk)
	modeltest.WantFailed(t, r, "server error in stream", `{\"detail\":\"---`)
	if len(r.Error) > 400 {
		t.Fatalf("error of %d bytes, want the object's start only: %.300q…", len(r.Error), r.Error)
	}
	for i := 8; i+8 <= len(key); i++ {
		if strings.Contains(r.Error, key[i:i+8]) {
			t.Fatalf("error %q holds %q of the API key", r.Error, key[i:i+8])
		}
	}
	if r.Text != "Hel" {
		t.Fatalf("text %q, want the text streamed before the error", r.Text)
	}
}

// The message of an error status, and of an error object in the stream,
// is told by its start, not all of it (a server may send a large one),
// and an API key it quotes is cut out, even across the clip.
func TestAdapter_LongErrorMessageIsClippedAndRedacted(t *testing.T) {
	const key = "sk-proj-secret-0123456789abcdef"
	status := func(w http.ResponseWriter, message string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": message, "type": "invalid_request_error"}})
		_, _ = w.Write(b)
	}
	inStream := func(w http.ResponseWriter, message string) {
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": message}})
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, sse(content("Hel"), "data: "+string(b)+"\n\n"))
	}
	for want, write := range map[string]func(http.ResponseWriter, string){"HTTP 400": status, "server error in stream": inStream} {
		rg := newRig(t, openai.Options{APIKey: key, MaxRetries: openai.NoRetries}, modeltest.EchoKeyInLongMessage(write))
		modeltest.WantLongMessageClipped(t, rg.Ask("s1", userAsk), want, key)
	}
}

// Keys sent through RequestOptions (an Azure-style api-key header, a
// key in the query) are not repeated by the ERROR frame either.
func TestAdapter_KeysOfRequestOptionsAreRedacted(t *testing.T) {
	const header, query = "azure-secret-0123456789", "query-secret-0123456789"
	rg := newRig(t, openai.Options{MaxRetries: openai.NoRetries, RequestOptions: []option.RequestOption{
		option.WithHeader("api-key", header), option.WithQuery("key", query),
	}}, modeltest.EchoCredentials(writeError(http.StatusUnauthorized)))
	modeltest.WantCredentialsRedacted(t, rg.Ask("s1", userAsk), header, query)
}

// A key in the query is redacted as the server saw it too: escaped in
// the query string, which a server quoting the query repeats so (an
// Azure SAS signature is base64, with '/', '+' and '=').
func TestAdapter_EscapedQueryKeyIsRedacted(t *testing.T) {
	const query = "sig/secret+0123456789=="
	rg := newRig(t, openai.Options{MaxRetries: openai.NoRetries, RequestOptions: []option.RequestOption{
		option.WithQuery("api-key", query),
	}}, modeltest.EchoCredentials(writeError(http.StatusUnauthorized)))
	modeltest.WantCredentialsRedacted(t, rg.Ask("s1", userAsk), query, url.QueryEscape(query))
}

// A key shorter than 8 bytes is redacted too, where it stands as a word.
func TestAdapter_ShortKeyIsRedacted(t *testing.T) {
	const key = "k3y-9"
	rg := newRig(t, openai.Options{APIKey: key, MaxRetries: openai.NoRetries}, modeltest.EchoCredentials(writeError(http.StatusUnauthorized)))
	modeltest.WantCredentialsRedacted(t, rg.Ask("s1", userAsk), key)
}

// A request that fails without a response names its URL: without the
// query, where keys may be.
func TestAdapter_FailedRequestURLHasNoQuery(t *testing.T) {
	const query = "query-secret-0123456789"
	rg := newRig(t, openai.Options{MaxRetries: openai.NoRetries, RequestOptions: []option.RequestOption{option.WithQuery("key", query)}}, modeltest.HangUp())
	modeltest.WantURLWithoutCredentials(t, rg.Ask("s1", userAsk), "/v1/chat/completions", query)
}

// writeError writes the API's error body with status and message.
func writeError(status int) func(w http.ResponseWriter, message string) {
	return func(w http.ResponseWriter, message string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": message, "type": "invalid_request_error", "code": "invalid_api_key"}})
		_, _ = w.Write(b)
	}
}

// The password of the HTTP client's proxy is not repeated either, plain
// or as the basic auth the client sends the proxy (a proxy quoting the
// Proxy-Authorization it refuses), also when a resilience.Transport
// wraps the transport that knows the proxy.
func TestAdapter_ProxyPasswordIsRedacted(t *testing.T) {
	for _, wrapped := range []bool{false, true} {
		t.Run(fmt.Sprintf("wrapped=%v", wrapped), func(t *testing.T) { testProxyPasswordIsRedacted(t, wrapped) })
	}
}

func testProxyPasswordIsRedacted(t *testing.T, wrapped bool) {
	const password = "proxy-secret-0123456789"
	refuse := func(_ int, w http.ResponseWriter, r *http.Request, _ map[string]json.RawMessage) {
		w.WriteHeader(http.StatusProxyAuthRequired)
		_, _ = io.WriteString(w, "proxy refused "+r.Header.Get("Proxy-Authorization"))
	}
	rg := modeltest.NewRig(t, refuse, func(base string, client *http.Client) actors.Spec {
		u, err := url.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		tr := client.Transport.(*http.Transport).Clone()
		tr.Proxy = http.ProxyURL(&url.URL{Scheme: "http", User: url.UserPassword("me", password), Host: u.Host})
		t.Cleanup(tr.CloseIdleConnections)
		var rt http.RoundTripper = tr
		if wrapped {
			if rt, err = resilience.New(tr, &resilience.Options{MaxRetries: resilience.NoRetries}); err != nil {
				t.Fatal(err)
			}
		}
		return adapter(t, openai.Options{MaxRetries: openai.NoRetries})(base, &http.Client{Transport: rt})
	})
	r := rg.Ask("s1", userAsk)
	if !r.Failed || !strings.Contains(r.Error, "HTTP 407") || !strings.Contains(r.Error, "proxy refused") {
		t.Fatalf("failed %v with %q, want the status and the proxy's page", r.Failed, r.Error)
	}
	basic := base64.StdEncoding.EncodeToString([]byte("me:" + password))
	for _, s := range []string{password, basic} {
		if strings.Contains(r.Error, s) {
			t.Errorf("error %q holds the proxy's credential %q", r.Error, s)
		}
	}
}

// A credential the HTTP client's transport adds below the SDK (an OAuth2
// transport's bearer token) is not repeated either when the server
// quotes it: it is redacted as it went on the wire.
func TestAdapter_CredentialOfTheTransportIsRedacted(t *testing.T) {
	const token = "oauth-token-0123456789"
	rg := modeltest.NewRig(t, modeltest.EchoCredentials(writeError(http.StatusUnauthorized)), func(url string, client *http.Client) actors.Spec {
		return adapter(t, openai.Options{MaxRetries: openai.NoRetries})(url, &http.Client{Transport: modeltest.TokenTransport(client.Transport, token)})
	})
	modeltest.WantCredentialsRedacted(t, rg.Ask("s1", userAsk), token)
}

// The META events of a resilience.Transport's retries say why the
// attempt failed without the credentials that error quoted: the API key,
// and a token the transport below the SDK added.
func TestAdapter_RetryEventsAreRedacted(t *testing.T) {
	withKey := func(key string) func(string, *http.Client) actors.Spec {
		return adapter(t, openai.Options{APIKey: key, MaxRetries: openai.NoRetries})
	}
	modeltest.CheckRetriesRedacted(t, sse(content("Hi"), finish("stop")), withKey, adapter(t, openai.Options{MaxRetries: openai.NoRetries}))
}

// A request the server redirects to another origin is refused, and not
// retried: the SDK retries a request that failed without a response, but
// the refusal is permanent, and a retry would only send the prompt to the
// server again.
func TestAdapter_RefusedRedirectIsNotRetried(t *testing.T) {
	for _, status := range []int{http.StatusFound, http.StatusTemporaryRedirect} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			rg := newRig(t, openai.Options{MaxRetries: 2}, modeltest.RedirectAway(status))
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
			rg := newRig(t, openai.Options{MaxRetries: 2}, modeltest.RedirectHere(status, sse(content("Moved in"), finish("stop"))))
			r := rg.Ask("s1", userAsk)
			if status == http.StatusTemporaryRedirect || status == http.StatusPermanentRedirect {
				modeltest.WantRedirectHereFollowed(t, rg, r, "/v1/chat/completions", "Moved in")
				return
			}
			modeltest.WantRedirectHereRefused(t, rg, r, status, "/v1/chat/completions")
		})
	}
}

// A request the server redirects in a loop on its own origin is stopped
// after 10 redirects, and not retried: the loop would stop the retry as
// it stopped the first attempt, after the prompt went to the server 10
// times more.
func TestAdapter_RedirectLoopIsNotRetried(t *testing.T) {
	rg := newRig(t, openai.Options{MaxRetries: 2}, modeltest.RedirectLoop())
	modeltest.WantRedirectLoopStoppedOnce(t, rg, rg.Ask("s1", userAsk))
}

// A chunk that does not decode is quoted in the answer's error, and a
// URL in it as a Go server's JSON writes it ('&' as \u0026): the values
// of its query are cut, past the escaped '&' too.
func TestAdapter_QueryOfAURLInAnUndecodedChunkIsCut(t *testing.T) {
	const token = "query-token-0123456789"
	msg, err := json.Marshal("moved to https://h.example/v1?a=1&token=" + token)
	if err != nil {
		t.Fatal(err)
	}
	rg := newRig(t, openai.Options{MaxRetries: openai.NoRetries}, modeltest.StreamBody(`data: {"error":`+string(msg)+"\n\n"))
	r := rg.Ask("s1", userAsk)
	if !r.Failed || !strings.Contains(r.Error, "decode chunk") || !strings.Contains(r.Error, "https://h.example/v1?a=xxxxx") {
		t.Errorf("failed %v with %q; want the chunk that does not decode quoted, its URL's query cut", r.Failed, r.Error)
	}
	if strings.Contains(r.Error, token) {
		t.Errorf("error %q shows the query's token", r.Error)
	}
}
