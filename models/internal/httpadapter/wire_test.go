package httpadapter_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/internal/httpadapter"
	"github.com/polyweave/polyweave-go/models/modeltest"
	"github.com/polyweave/polyweave-go/models/resilience"
)

// TestAnswer_RedactsWhatWentOnTheWireOverHTTP2: over HTTP/2 too, a token
// the client's transport added is cut out of an error that quotes it,
// and the host (which HTTP/2 sends in its :authority pseudo-header) is
// not taken for a credential.
func TestAnswer_RedactsWhatWentOnTheWireOverHTTP2(t *testing.T) {
	const token = "oauth-token-0123456789"
	srv, client := refusingServer(t, true, func(r *http.Request) string {
		return fmt.Sprintf("refused %s at %s", r.Header.Get("Authorization"), r.Host)
	})
	e := httpadapter.Open(httpadapter.Config{HTTPClient: &http.Client{Transport: modeltest.TokenTransport(client.Transport, token)}})
	err := echoAnswer(e, srv.URL+"/v1")(context.Background())
	host := strings.TrimPrefix(srv.URL, "https://")
	if err == nil || !strings.Contains(err.Error(), "HTTP/2 401: refused Bearer [redacted] at "+host) {
		t.Fatalf("error %v; want the HTTP/2 status and the host whole, the token cut out", err)
	}
}

// refusingServer starts a TLS server (HTTP/2 when h2) that answers every
// request 401 with the text quote makes of it, and returns it with a
// client of it; the test's cleanup ends both and checks that nothing of
// them is left running.
func refusingServer(t *testing.T, h2 bool, quote func(*http.Request) string) (*httptest.Server, *http.Client) {
	return tlsServer(t, h2, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, quote(r))
	})
}

// tlsServer starts a TLS server (HTTP/2 when h2) of handler, and returns
// it with a client of it; the test's cleanup ends both and checks that
// nothing of them is left running.
func tlsServer(t *testing.T, h2 bool, handler http.HandlerFunc) (*httptest.Server, *http.Client) {
	before := goleak.IgnoreCurrent()
	srv := httptest.NewUnstartedServer(handler)
	srv.EnableHTTP2 = h2
	srv.StartTLS()
	client := srv.Client()
	t.Cleanup(func() {
		client.CloseIdleConnections()
		srv.Close()
		leakcheck.VerifyNone(t, before)
	})
	return srv, client
}

// echoAnswer is the answer of e whose send posts to url, through the
// middleware Credentials as an adapter's SDK client does, and fails with
// the status and body of the response.
func echoAnswer(e *httpadapter.Endpoint, url string) func(ctx context.Context) error {
	answer := e.Answer(func(*models.Request) ([]byte, error) { return nil, nil },
		func(ctx context.Context, _ string, _ []byte, _ func(*messages.Frame)) ([]*messages.Frame, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
			if err != nil {
				return nil, err
			}
			res, err := httpadapter.Credentials(req, e.HTTPClient().Do) // as the SDK sends it
			if err != nil {
				return nil, err
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			return nil, fmt.Errorf("HTTP/%d %d: %s", res.ProtoMajor, res.StatusCode, b)
		})
	return func(ctx context.Context) error {
		_, err := answer(ctx, &models.Request{StreamID: "s1"}, func(*messages.Frame) {})
		return err
	}
}

// TestAnswer_RedactsEachCookieOfTheJar: the cookies an HTTP client's jar
// adds below the SDK go out in one Cookie header over HTTP/1 ("a=1;
// b=2") and one field a cookie over HTTP/2; a server that quotes the
// header in its error has every cookie's value cut out, the first
// included, and keeps the names.
func TestAnswer_RedactsEachCookieOfTheJar(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprint("HTTP/2=", h2), func(t *testing.T) {
			srv, client := refusingServer(t, h2, func(r *http.Request) string {
				return "refused cookies " + strings.Join(r.Header.Values("Cookie"), "; ")
			})
			jar, err := cookiejar.New(nil)
			if err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(srv.URL)
			const session, csrf = "session-0123456789abcdef", "csrf-fedcba9876543210"
			jar.SetCookies(u, []*http.Cookie{{Name: "session", Value: session}, {Name: "csrf", Value: csrf}})
			client.Jar = jar
			err = echoAnswer(httpadapter.Open(httpadapter.Config{HTTPClient: client}), srv.URL+"/v1")(context.Background())
			if err == nil {
				t.Fatal("no error")
			}
			for _, s := range []string{session, csrf} {
				if strings.Contains(err.Error(), s) {
					t.Errorf("error %q holds the cookie %q", err, s)
				}
			}
			if !strings.Contains(err.Error(), "refused cookies ") || !strings.Contains(err.Error(), "session=") || !strings.Contains(err.Error(), "csrf=") {
				t.Errorf("error %q; want the names of the cookies kept", err)
			}
		})
	}
}

// traceBelow is a transport that traces each request with a
// ClientTrace of its own, as an instrumented client's transport does.
type traceBelow struct {
	next  http.RoundTripper
	trace func() *httptrace.ClientTrace
}

func (t traceBelow) RoundTrip(r *http.Request) (*http.Response, error) {
	return t.next.RoundTrip(r.WithContext(httptrace.WithClientTrace(r.Context(), t.trace())))
}

// TestAnswer_KeepsTheCallersClientTraces: the wire hook composes with the
// ClientTraces of the caller, in the answer's context and added by a
// transport below the SDK: each still hears the headers written and the
// connection got, and the token is cut out all the same.
func TestAnswer_KeepsTheCallersClientTraces(t *testing.T) {
	before := goleak.IgnoreCurrent()
	const token = "oauth-token-0123456789"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = fmt.Fprintf(w, "refused %s", r.Header.Get("Authorization"))
	}))
	client := srv.Client()
	defer func() {
		client.CloseIdleConnections()
		srv.Close()
		leakcheck.VerifyNone(t, before)
	}()
	var mu sync.Mutex
	heard := map[string]bool{}
	trace := func(who string) *httptrace.ClientTrace {
		return &httptrace.ClientTrace{
			GotConn: func(httptrace.GotConnInfo) { mu.Lock(); heard[who+" conn"] = true; mu.Unlock() },
			WroteHeaderField: func(name string, _ []string) {
				if name == "Authorization" {
					mu.Lock()
					heard[who+" Authorization"] = true
					mu.Unlock()
				}
			},
		}
	}
	rt := traceBelow{next: modeltest.TokenTransport(client.Transport, token), trace: func() *httptrace.ClientTrace { return trace("below") }}
	e := httpadapter.Open(httpadapter.Config{HTTPClient: &http.Client{Transport: rt}})
	err := echoAnswer(e, srv.URL)(httptrace.WithClientTrace(context.Background(), trace("caller")))
	if err == nil || !strings.Contains(err.Error(), "refused Bearer [redacted]") {
		t.Errorf("error %v; want the token cut out", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"caller conn", "caller Authorization", "below conn", "below Authorization"} {
		if !heard[want] {
			t.Errorf("the trace did not hear %q; heard %v", want, heard)
		}
	}
}

// TestAnswer_RedactsWhatTheProxyIsSent: the CONNECT that opens the
// tunnel of an https request through a proxy carries the headers of the
// *http.Transport's ProxyConnectHeader (or those its GetProxyConnectHeader
// returns), and the user info of the proxy's URL as basic auth, where no
// ClientTrace of the request hears them; a
// proxy that refuses the tunnel with a reason quoting them (the
// transport's error is that reason) has their credentials cut out all
// the same, behind a resilience.Transport too, and the rest of its
// reason kept.
func TestAnswer_RedactsWhatTheProxyIsSent(t *testing.T) {
	const token, key, password = "proxy-token-0123456789", "proxy-key-9876543210", "proxy-password-0123456789"
	for _, c := range []struct {
		name    string
		user    *url.Userinfo
		connect http.Header
		get     bool // connect is what GetProxyConnectHeader returns
		want    string
	}{
		{"ProxyConnectHeader", nil, http.Header{"Proxy-Authorization": {"Bearer " + token}, "X-Proxy-Key": {key}}, false,
			"tunnel refused to Bearer [redacted] with key [redacted]"},
		{"GetProxyConnectHeader", nil, http.Header{"Proxy-Authorization": {"Bearer " + token}, "X-Proxy-Key": {key}}, true,
			"tunnel refused to Bearer [redacted] with key [redacted]"},
		{"user info", url.UserPassword("me", password), nil, false, "tunnel refused to Basic [redacted] with key "},
		{"user name", url.User(token), nil, false, "tunnel refused to Basic [redacted] with key "},
	} {
		for _, wrapped := range []bool{false, true} {
			t.Run(fmt.Sprint(c.name, "/wrapped=", wrapped), func(t *testing.T) {
				srv, client := refusingServer(t, false, func(*http.Request) string { return "the proxy let it through" })
				proxy := refusingProxy(t)
				proxy.User = c.user
				tr := client.Transport.(*http.Transport).Clone()
				tr.Proxy = http.ProxyURL(proxy)
				// Each call of GetProxyConnectHeader, the transport's and
				// any other, is asked for the same proxy and target.
				var mu sync.Mutex
				asked := map[string]bool{}
				if c.get {
					tr.GetProxyConnectHeader = func(_ context.Context, proxyURL *url.URL, target string) (http.Header, error) {
						mu.Lock()
						asked[proxyURL.String()+" "+target] = true
						mu.Unlock()
						return c.connect.Clone(), nil
					}
				} else {
					tr.ProxyConnectHeader = c.connect
				}
				t.Cleanup(tr.CloseIdleConnections)
				var rt http.RoundTripper = tr
				if wrapped {
					var err error
					if rt, err = resilience.New(tr, &resilience.Options{MaxRetries: resilience.NoRetries}); err != nil {
						t.Fatal(err)
					}
				}
				err := echoAnswer(httpadapter.Open(httpadapter.Config{HTTPClient: &http.Client{Transport: rt}}), srv.URL+"/v1")(context.Background())
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("error %v; want the proxy's reason with the credentials it was sent cut out", err)
				}
				mu.Lock()
				defer mu.Unlock()
				if want := proxy.String() + " " + strings.TrimPrefix(srv.URL, "https://"); c.get && (len(asked) != 1 || !asked[want]) {
					t.Errorf("GetProxyConnectHeader was asked for %v; want %q alone", asked, want)
				}
			})
		}
	}
}

// refusingProxy starts an HTTP proxy that refuses every CONNECT with a
// status whose reason quotes the request's Proxy-Authorization and
// X-Proxy-Key headers, and returns its URL; the test's cleanup ends it.
func refusingProxy(t *testing.T) *url.URL {
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		_, _ = fmt.Fprintf(buf, "HTTP/1.1 407 tunnel refused to %s with key %s\r\nContent-Length: 0\r\n\r\n",
			r.Header.Get("Proxy-Authorization"), r.Header.Get("X-Proxy-Key"))
		_ = buf.Flush()
	}))
	t.Cleanup(proxy.Close)
	u, err := url.Parse(proxy.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestAnswer_RedactsATokenAsTheURLsUserName: a token given as the user
// name of the URL (https://TOKEN@host/..., with no password, or with a
// password that says nothing) goes to the server as basic auth; the
// error of a server quoting that header, and http.Client's error naming
// the URL of a request that failed, show neither the token nor the
// basic auth made of it, and still name the host. So when the URL is the
// base URL of the Config, and when it is only the request's.
func TestAnswer_RedactsATokenAsTheURLsUserName(t *testing.T) {
	const token = "user-token-0123456789"
	for _, c := range []struct{ name, user string }{
		{"user name", token},
		{"user name and password", token + ":x-oauth-basic"},
	} {
		for _, inConfig := range []bool{false, true} {
			t.Run(fmt.Sprint(c.name, "/in config=", inConfig), func(t *testing.T) {
				var hangUp atomic.Bool
				srv, client := tlsServer(t, false, func(w http.ResponseWriter, r *http.Request) {
					if hangUp.Load() {
						conn, _, err := http.NewResponseController(w).Hijack()
						if err == nil {
							_ = conn.Close()
						}
						return
					}
					w.WriteHeader(http.StatusUnauthorized)
					_, _ = fmt.Fprintf(w, "refused %s", r.Header.Get("Authorization"))
				})
				base := strings.Replace(srv.URL, "://", "://"+c.user+"@", 1) + "/v1"
				cfg := httpadapter.Config{HTTPClient: client}
				if inConfig {
					cfg.BaseURL = base
				}
				e := httpadapter.Open(cfg)
				host := strings.TrimPrefix(srv.URL, "https://")
				basic := base64.StdEncoding.EncodeToString([]byte(c.user))
				if !strings.Contains(c.user, ":") {
					basic = base64.StdEncoding.EncodeToString([]byte(c.user + ":"))
				}
				for _, hang := range []bool{false, true} {
					hangUp.Store(hang)
					err := echoAnswer(e, base)(context.Background())
					if err == nil {
						t.Fatal("no error")
					}
					if strings.Contains(err.Error(), token) || strings.Contains(err.Error(), basic) || strings.Contains(err.Error(), basic[:len(basic)-4]) {
						t.Errorf("error %q shows the token of the URL's user name", err)
					}
					if want := "refused Basic "; !hang && !strings.Contains(err.Error(), want) {
						t.Errorf("error %q; want the server's reason, %q", err, want)
					}
					if hang && !strings.Contains(err.Error(), host+"/v1") {
						t.Errorf("error %q; want the host and path of the URL", err)
					}
				}
			})
		}
	}
}

// TestAnswer_CutsTheUserInfoOutOfEveryURL: the user info of a URL an
// error names is cut out whatever it holds: a user name too short to be
// cut out wherever it stands ("me"), one escaped in the URL
// (tok%2Fen..., which url.URL.Username gives unescaped), one with an
// '@' or ':' of its own, and a password as http.Client writes it (***)
// or as the SDKs' errors quote the request's URL (whole, escaped). The
// host and path stay, so that the error still says where the request
// went.
func TestAnswer_CutsTheUserInfoOutOfEveryURL(t *testing.T) {
	for _, user := range []string{
		"me",
		"me:pw",
		"tok%2Fen-0123456789",
		"me%40example.com:pa%2Fss-0123456789",
		"tok:p@ss-0123456789",
		"%74ok-0123456789", // "tok-0123456789" escaped where it need not be
	} {
		for _, inConfig := range []bool{false, true} {
			t.Run(fmt.Sprint(user, "/in config=", inConfig), func(t *testing.T) {
				var base string
				err := postAnswerErr(t, hangUp, func(srvURL string) (cfg httpadapter.Config, target string) {
					base = strings.Replace(srvURL, "://", "://"+user+"@", 1) + "/v1"
					if inConfig {
						cfg.BaseURL = base
					}
					return cfg, base
				})
				if err == nil {
					t.Fatal("no error")
				}
				u, perr := url.Parse(base)
				if perr != nil {
					t.Fatal(perr)
				}
				password, _ := u.User.Password()
				shown := []string{"//" + user + "@", "//" + u.User.String() + "@", "//" + u.User.Username() + "@", "//" + u.User.Username() + ":"}
				if password != "" {
					shown = append(shown, password, url.User(password).String())
				}
				for _, s := range shown {
					if strings.Contains(err.Error(), s) {
						t.Errorf("error %q shows %q of the URL's user info", err, s)
					}
				}
				if strings.Count(err.Error(), "@"+u.Host+"/v1") != 2 {
					t.Errorf("error %q; want the host and path of the URL in both its quotes, past its user info cut out", err)
				}
			})
		}
	}
}

// TestAnswer_CutsTheQueryAndFragmentValuesOfARedirectsLocation: a
// request the server redirects on its own origin with 307 is followed,
// and when the request to the redirect's Location fails (the server
// hangs up), http.Client's error quotes that Location as the server
// wrote it: a token in its query, which the request did not send and
// no credential rule knows by name, and one in its fragment. The error
// keeps the path and the parameters' names, and cuts their values.
func TestAnswer_CutsTheQueryAndFragmentValuesOfARedirectsLocation(t *testing.T) {
	const queryToken, fragmentToken = "location-token-0123456789", "fragment-token-0123456789"
	err := postAnswerErr(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1" {
			http.Redirect(w, r, "/moved?sig="+queryToken+"#access_token="+fragmentToken, http.StatusTemporaryRedirect)
			return
		}
		hangUp(w, r)
	}, func(srvURL string) (httpadapter.Config, string) {
		return httpadapter.Config{BaseURL: srvURL + "/v1"}, srvURL + "/v1"
	})
	if err == nil {
		t.Fatal("no error")
	}
	for _, s := range []string{queryToken, fragmentToken} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("error %q shows %q of the redirect's Location", err, s)
		}
	}
	if want := "/moved?sig=xxxxx#access_token=xxxxx\": EOF"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q; want it to name the request that failed, %q", err, want)
	}
}

// hangUp closes the connection of the request without an answer: the
// client's error names the URL.
func hangUp(w http.ResponseWriter, _ *http.Request) {
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		_ = conn.Close()
	}
}

// postAnswerErr starts a server answering with handler and returns the
// error of an answer of the endpoint opened with the Config setup makes
// of the server's URL (on the server's client), whose send POSTs to the
// target setup makes of it, through [httpadapter.Credentials] and the
// endpoint's client, and quotes the request's URL in its error as the
// SDKs do. The server is closed, and goroutines checked for leaks,
// before it returns.
func postAnswerErr(t *testing.T, handler http.HandlerFunc, setup func(srvURL string) (cfg httpadapter.Config, target string)) error {
	t.Helper()
	before := goleak.IgnoreCurrent()
	srv := httptest.NewServer(handler)
	client := srv.Client()
	defer func() {
		client.CloseIdleConnections()
		srv.Close()
		leakcheck.VerifyNone(t, before)
	}()
	cfg, to := setup(srv.URL)
	cfg.HTTPClient = client
	e := httpadapter.Open(cfg)
	answer := e.Answer(func(*models.Request) ([]byte, error) { return nil, nil },
		func(ctx context.Context, _ string, _ []byte, _ func(*messages.Frame)) ([]*messages.Frame, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, to, nil)
			if err != nil {
				return nil, err
			}
			_, err = httpadapter.Credentials(req, e.HTTPClient().Do)
			return nil, fmt.Errorf("POST %q: %w", req.URL, err)
		})
	_, err := answer(context.Background(), &models.Request{StreamID: "s1"}, func(*messages.Frame) {})
	return err
}
