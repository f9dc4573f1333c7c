package modeltest

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/resilience"
)

// TokenTransport returns a transport that sends each request through
// base with the header Authorization: Bearer token, set on a copy of the
// request as an OAuth2 transport (golang.org/x/oauth2's) does: a
// credential added below the adapter's SDK, which never sees it.
func TokenTransport(base http.RoundTripper, token string) http.RoundTripper {
	return tokenTransport{base: base, token: token}
}

type tokenTransport struct {
	base  http.RoundTripper
	token string
}

func (t tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return t.base.RoundTrip(r)
}

// GarbleCredential returns a handler that answers the first request
// with a line that is not HTTP, quoting the credential the request came
// with (its X-Api-Key header, or else its Authorization), as a broken
// proxy might: the client fails before any response, with an error that
// quotes the line (net/http's "malformed HTTP status code"), which a
// resilience.Transport retries. next answers the later requests.
func GarbleCredential(next Handler) Handler {
	return func(n int, w http.ResponseWriter, r *http.Request, body map[string]json.RawMessage) {
		if n > 0 {
			next(n, w, r, body)
			return
		}
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		defer conn.Close()
		_, _ = fmt.Fprintf(buf, "%s\r\n\r\n", cmp.Or(r.Header.Get("X-Api-Key"), r.Header.Get("Authorization")))
		_ = buf.Flush()
	}
}

// AskFrames is [Rig.Ask] that returns the frames of the answer too.
func (rg *Rig) AskFrames(stream string, params ...models.Param) ([]*messages.Frame, *models.Response) {
	rg.t.Helper()
	req := &models.Request{StreamID: stream, Params: params}
	if err := rg.Conn.SendAll(req.Frames()...); err != nil {
		rg.t.Fatal(err)
	}
	frames, err := rg.Conn.RecvStream(rg.Ctx, stream)
	if err != nil {
		rg.t.Fatalf("read answer: %v", err)
	}
	r, err := models.ReadResponse(frames)
	if err != nil {
		rg.t.Fatalf("answer breaks the contract: %v", err)
	}
	return frames, r
}

// CheckRetriesRedacted runs [CheckRetryRedacted] for an adapter with an
// API key (made by withKey) and for one (made by plain) whose transport
// adds a bearer token ([TokenTransport]).
func CheckRetriesRedacted(t *testing.T, answer string, withKey func(key string) func(url string, client *http.Client) actors.Spec, plain func(url string, client *http.Client) actors.Spec) {
	const key, token = "sk-api-secret-0123456789", "oauth-token-0123456789"
	t.Run("api key", func(t *testing.T) {
		CheckRetryRedacted(t, answer, func(rt http.RoundTripper) http.RoundTripper { return rt }, withKey(key), key)
	})
	t.Run("token of the transport", func(t *testing.T) {
		CheckRetryRedacted(t, answer, func(rt http.RoundTripper) http.RoundTripper { return TokenTransport(rt, token) }, plain, token)
	})
}

// CheckRetryRedacted runs an adapter (made by adapter from the URL of a
// server and an HTTP client) whose client sends through a
// resilience.Transport retrying once, at once, over wrap of the server's
// transport. The server answers the first request as [GarbleCredential]
// does and the retry with answer, SSE bytes saying "Hi". The answer must
// be the retry's, and its frames must pass [WantRetryRedacted] with
// secret.
func CheckRetryRedacted(t *testing.T, answer string, wrap func(http.RoundTripper) http.RoundTripper, adapter func(url string, client *http.Client) actors.Spec, secret string) {
	t.Helper()
	rg := NewRig(t, GarbleCredential(StreamBody(answer)), func(url string, client *http.Client) actors.Spec {
		tr, err := resilience.New(wrap(client.Transport), &resilience.Options{MaxRetries: 1,
			Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
		if err != nil {
			t.Fatal(err)
		}
		return adapter(url, tr.Client())
	})
	frames, r := rg.AskFrames("s1", Param(models.ParamMessages, `[{"role":"user","content":"Hello"}]`))
	if r.Failed || r.Text != "Hi" {
		t.Fatalf("answer failed %v %q, text %q; want the retry's answer", r.Failed, r.Error, r.Text)
	}
	WantRetryRedacted(t, frames, secret)
}

// WantRetryRedacted checks that frames, the answer to [GarbleCredential]
// from an adapter whose resilience.Transport retried, hold the META
// event of the retry, saying why (the garbled answer), and that no
// frame, that event included, holds any of secrets.
func WantRetryRedacted(t testing.TB, frames []*messages.Frame, secrets ...string) {
	t.Helper()
	retried := false
	for _, f := range frames {
		if f.GetType() == messages.FrameType_META && f.GetName() == resilience.MetaEvent &&
			strings.Contains(string(f.GetPayload()), `"kind":"retry"`) && strings.Contains(string(f.GetPayload()), "malformed HTTP") {
			retried = true
		}
		for _, s := range secrets {
			if strings.Contains(f.GetText(), s) || strings.Contains(string(f.GetPayload()), s) {
				t.Errorf("%s frame %q holds the credential %q: %s", f.GetType(), f.GetName(), s, f.GetPayload())
			}
		}
	}
	if !retried {
		t.Errorf("no META retry event saying the answer was malformed in %s", describe(frames))
	}
}
