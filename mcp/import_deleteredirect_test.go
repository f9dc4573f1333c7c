package mcp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/mcp"
)

// TestImport_CloseReportsARedirectedDelete: a server that answers the
// DELETE ending its session with a redirect did not end it. The redirect
// is not followed (301, 302 and 303 would make the DELETE a GET, whose
// answer says nothing of the session; a session is ended where it was
// opened), nothing reaches the place it points to, and Close says the
// server did not end the session, with the status.
func TestImport_CloseReportsARedirectedDelete(t *testing.T) {
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			elsewhere, reached := redirectTarget(t)
			ss, url := newSessionServer(t, "", func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, elsewhere+"/mcp", status)
			})
			err := ss.importAndClose(t, url)
			want := fmt.Sprintf("the server did not end the session: it answered the DELETE with HTTP %d %s", status, http.StatusText(status))
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Close: %v; want it to say %q", err, want)
			}
			if got := reached(); len(got) != 0 {
				t.Errorf("the redirect was followed: the place it points to got %v", got)
			}
		})
	}
}

// TestImport_RedirectToAnotherOriginIsNotFollowed: a request a server
// redirects to another origin (another host or port, or its own host
// without TLS), with any status, is not followed: what it carries (the
// bearer token, the Mcp-Session-Id header, the JSON-RPC message) stays
// with the server. Import's error says the server redirected the POST,
// with the status, and names neither the place it points to nor the
// credentials of its URL (user info, a token in the query).
func TestImport_RedirectToAnotherOriginIsNotFollowed(t *testing.T) {
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			elsewhere, reached := redirectTarget(t)
			const user, token = "target-user-0123456789", "target-token-0123456789"
			target := strings.Replace(elsewhere, "://", "://"+user+":pw@", 1) + "/mcp?token=" + token
			srv := postServer(t, nil, func(w http.ResponseWriter, r *http.Request, _ []byte) {
				http.Redirect(w, r, target, status)
			})
			rt := actorstest.NewRuntime(t, nil)
			im, err := mcp.Import(context.Background(), rt, &mcp.ImportOptions{URL: srv.URL + "/mcp", KeepAlive: -1, BearerToken: urlBearer})
			if im != nil || err == nil {
				t.Fatalf("Import: %v, %v; want an error", im, err)
			}
			if got := reached(); len(got) != 0 {
				t.Errorf("the redirect was followed: the place it points to got %v", got)
			}
			want := fmt.Sprintf("the server redirected the POST with HTTP %d %s to another origin", status, http.StatusText(status))
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Import: %v; want it to say %q", err, want)
			}
			for _, shown := range []string{user, token, strings.TrimPrefix(elsewhere, "http://")} {
				if strings.Contains(err.Error(), shown) {
					t.Errorf("Import: %v; it names %q of the place the redirect points to", err, shown)
				}
			}
		})
	}
}

// TestImport_RedirectedPostKeepsItsMethod: a POST (a JSON-RPC message of
// streamable HTTP) that a server redirects on its own origin with 301,
// 302 or 303, which http.Client would send on as a GET without its body,
// is not followed: the place the redirect points to gets nothing, and
// Import's error says the server redirected the POST, with the status,
// without quoting the redirect's query (where a token may be). A 307 or
// 308 keeps the method and body, and is followed, with the bearer token:
// the place it points to is on the import's origin.
func TestImport_RedirectedPostKeepsItsMethod(t *testing.T) {
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			var mu sync.Mutex
			var reached, auth []string
			srv := postServer(t, nil, func(w http.ResponseWriter, r *http.Request, _ []byte) {
				if r.URL.Path == "/elsewhere" {
					mu.Lock()
					reached = append(reached, r.Method)
					auth = append(auth, r.Header.Get("Authorization"))
					mu.Unlock()
					w.WriteHeader(http.StatusNotFound)
					return
				}
				http.Redirect(w, r, "/elsewhere?token="+redirectToken, status)
			})
			rt := actorstest.NewRuntime(t, nil)
			im, err := mcp.Import(context.Background(), rt, &mcp.ImportOptions{URL: srv.URL + "/mcp", KeepAlive: -1, BearerToken: urlBearer})
			if im != nil || err == nil {
				t.Fatalf("Import: %v, %v; want an error", im, err)
			}
			mu.Lock()
			got, gotAuth := slices.Clone(reached), slices.Clone(auth)
			mu.Unlock()
			if status == http.StatusTemporaryRedirect || status == http.StatusPermanentRedirect {
				if len(got) == 0 || got[0] != http.MethodPost {
					t.Errorf("the place the redirect points to got %v; want the POST", got)
				} else if gotAuth[0] != "Bearer "+urlBearer {
					t.Errorf("the place the redirect points to got Authorization %q; want the bearer token", gotAuth[0])
				}
				return
			}
			if len(got) != 0 {
				t.Errorf("the redirect was followed: the place it points to got %v", got)
			}
			want := fmt.Sprintf("the server redirected the POST with HTTP %d %s", status, http.StatusText(status))
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Import: %v; want it to say %q", err, want)
			}
			if strings.Contains(err.Error(), redirectToken) {
				t.Errorf("Import: %v; it quotes the query of the redirect's Location", err)
			}
		})
	}
}

// redirectToken is a token in the query of a redirect's Location,
// fragmentToken one in its fragment (as an OAuth server writes it).
const redirectToken, fragmentToken = "location-token-0123456789", "fragment-token-0123456789"

// redirectTarget starts a server, closed with the test, that answers
// every request 404 and records its method; it returns the server's URL
// and a function that returns the methods recorded so far.
func redirectTarget(t *testing.T) (string, func() []string) {
	var mu sync.Mutex
	var reached []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reached = append(reached, r.Method)
		mu.Unlock()
		w.WriteHeader(http.StatusNotFound)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(reached)
	}
}

// TestImport_TooManyRedirectsDoNotQuoteTheLocation: a server that
// redirects a POST on its own origin with 307 or 308 again and again is
// followed ten times, as http.Client's default policy does, and Import's
// error says it stopped after 10 redirects, without quoting the user
// info, the query or the fragment of the Location it stopped at (a token
// in each).
func TestImport_TooManyRedirectsDoNotQuoteTheLocation(t *testing.T) {
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			const user = "location-user-0123456789"
			var n atomic.Int64
			var srv string
			s := postServer(t, nil, func(w http.ResponseWriter, r *http.Request, _ []byte) {
				i := n.Add(1)
				to := strings.Replace(srv, "://", "://"+user+"@", 1) + fmt.Sprintf("/mcp%d?token=%s&n=%d#access_token=%s", i, redirectToken, i, fragmentToken)
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
			for _, shown := range []string{redirectToken, user, fragmentToken} {
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
// parameters, and of its fragment's, but not their values.
func TestImport_FailureAfterARedirectDoesNotQuoteItsQuery(t *testing.T) {
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			srv := postServer(t, nil, func(w http.ResponseWriter, r *http.Request, _ []byte) {
				if r.URL.Path == "/mcp" {
					http.Redirect(w, r, "/moved?token="+redirectToken+"#access_token="+fragmentToken, status)
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
			if strings.Contains(err.Error(), redirectToken) || strings.Contains(err.Error(), fragmentToken) {
				t.Errorf("Import: %v; it quotes the query or fragment of the redirect's Location", err)
			}
			if want := "/moved?token=xxxxx"; !strings.Contains(err.Error(), want) {
				t.Errorf("Import: %v; want it to name the request that failed, %q", err, want)
			}
		})
	}
}
