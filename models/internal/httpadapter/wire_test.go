package httpadapter_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/internal/httpadapter"
	"github.com/polyweave/polyweave-go/models/modeltest"
)

// TestAnswer_RedactsWhatWentOnTheWireOverHTTP2: over HTTP/2 too, a token
// the client's transport added is cut out of an error that quotes it,
// and the host (which HTTP/2 sends in its :authority pseudo-header) is
// not taken for a credential.
func TestAnswer_RedactsWhatWentOnTheWireOverHTTP2(t *testing.T) {
	before := goleak.IgnoreCurrent()
	const token = "oauth-token-0123456789"
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = fmt.Fprintf(w, "refused %s at %s", r.Header.Get("Authorization"), r.Host)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	client := srv.Client()
	defer func() {
		client.CloseIdleConnections()
		srv.Close()
		leakcheck.VerifyNone(t, before)
	}()
	e := httpadapter.Open(httpadapter.Config{HTTPClient: &http.Client{Transport: modeltest.TokenTransport(client.Transport, token)}})
	answer := e.Answer(func(*models.Request) ([]byte, error) { return nil, nil },
		func(ctx context.Context, _ string, _ []byte, _ func(*messages.Frame)) ([]*messages.Frame, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1", nil)
			if err != nil {
				return nil, err
			}
			res, err := e.HTTPClient().Do(req)
			if err != nil {
				return nil, err
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			return nil, fmt.Errorf("HTTP/%d %d from %s: %s", res.ProtoMajor, res.StatusCode, srv.URL, b)
		})
	_, err := answer(context.Background(), &models.Request{StreamID: "s1"}, func(*messages.Frame) {})
	host := strings.TrimPrefix(srv.URL, "https://")
	if err == nil || !strings.Contains(err.Error(), "HTTP/2 401 from "+srv.URL+": refused Bearer [redacted] at "+host) {
		t.Fatalf("error %v; want the HTTP/2 status, the URL and the host whole, the token cut out", err)
	}
}
