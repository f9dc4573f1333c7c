package mcp_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/mcp"
)

// TestImport_TooManyRedirectsDoNotQuoteTheLocation: a server that
// redirects a POST on its own origin with 307 or 308 again and again is
// followed ten times, as http.Client's default policy does, and Import's
// error says it stopped after 10 redirects, without quoting the user
// info or the query of the Location it stopped at (a token in it).
func TestImport_TooManyRedirectsDoNotQuoteTheLocation(t *testing.T) {
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			const user = "location-user-0123456789"
			var n atomic.Int64
			var srv string
			s := postServer(t, nil, func(w http.ResponseWriter, r *http.Request, _ []byte) {
				i := n.Add(1)
				to := strings.Replace(srv, "://", "://"+user+"@", 1) + fmt.Sprintf("/mcp%d?token=%s&n=%d", i, redirectToken, i)
				http.Redirect(w, r, to, status)
			})
			srv = s.URL
			rt := actorstest.NewRuntime(t, nil)
			im, err := mcp.Import(context.Background(), rt, &mcp.ImportOptions{URL: srv + "/mcp", KeepAlive: -1})
			if im != nil || err == nil {
				t.Fatalf("Import: %v, %v; want an error", im, err)
			}
			if want := "stopped after 10 redirects"; !strings.Contains(err.Error(), want) {
				t.Errorf("Import: %v; want it to say %q", err, want)
			}
			for _, shown := range []string{redirectToken, user} {
				if strings.Contains(err.Error(), shown) {
					t.Errorf("Import: %v; it quotes %q of the redirect's Location", err, shown)
				}
			}
		})
	}
}

// TestImport_FailureAfterARedirectDoesNotQuoteItsQuery: a POST that a
// server redirects on its own origin with 307 or 308 to a URL with a
// query (a token in it) is followed; when the request to that URL fails
// (the server drops the connection), Import's error, which quotes the
// URL of the request that failed, shows the names of the query's
// parameters but not their values.
func TestImport_FailureAfterARedirectDoesNotQuoteItsQuery(t *testing.T) {
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			srv := postServer(t, nil, func(w http.ResponseWriter, r *http.Request, _ []byte) {
				if r.URL.Path == "/mcp" {
					http.Redirect(w, r, "/moved?token="+redirectToken, status)
					return
				}
				conn, _, err := http.NewResponseController(w).Hijack()
				if err != nil {
					t.Error(err)
					return
				}
				_ = conn.Close() // no answer
			})
			rt := actorstest.NewRuntime(t, nil)
			im, err := mcp.Import(context.Background(), rt, &mcp.ImportOptions{URL: srv.URL + "/mcp", KeepAlive: -1})
			if im != nil || err == nil {
				t.Fatalf("Import: %v, %v; want an error", im, err)
			}
			if strings.Contains(err.Error(), redirectToken) {
				t.Errorf("Import: %v; it quotes the query of the redirect's Location", err)
			}
			if want := "/moved?token=xxxxx"; !strings.Contains(err.Error(), want) {
				t.Errorf("Import: %v; want it to name the request that failed, %q", err, want)
			}
		})
	}
}
