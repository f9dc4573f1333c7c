package mcp_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/internal/syncbuf"
	"github.com/polyweave/polyweave-go/mcp"
	"github.com/polyweave/polyweave-go/models/scripted"
)

// The credentials an import's URL may carry, which none of its errors
// or log lines may show.
const urlPassword, urlToken, urlBearer = "pass-5318008135", "tok-7102938475", "bearer-6473829105"

// withCredentials is base with urlPassword in its user info and urlToken
// as the value of its query.
func withCredentials(base string) string {
	return strings.Replace(base, "://", "://me:"+urlPassword+"@", 1) + "/mcp?token=" + urlToken
}

// checkNoCredentials fails t when text shows a credential of the URL or
// the bearer token.
func checkNoCredentials(t *testing.T, what, text string) {
	t.Helper()
	for _, secret := range []string{urlPassword, urlToken, urlBearer} {
		if strings.Contains(text, secret) {
			t.Errorf("%s shows the credential %q: %s", what, secret, text)
		}
	}
}

// TestImport_ErrorOfAServerNotReachedShowsNoCredentials: go-sdk's error
// for a POST that failed quotes its URL as http.Client names it, with
// the password cut out but the query whole; Import's error names the
// server with the query's values cut out, and the error it wraps has
// them cut out too.
func TestImport_ErrorOfAServerNotReachedShowsNoCredentials(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close() // nothing listens there now
	rt := actorstest.NewRuntime(t, nil)
	im, err := mcp.Import(context.Background(), rt, &mcp.ImportOptions{URL: withCredentials(base), KeepAlive: -1, BearerToken: urlBearer})
	if im != nil || err == nil {
		t.Fatalf("Import: %v, %v; want an error", im, err)
	}
	if !strings.Contains(err.Error(), strings.TrimPrefix(base, "http://")) {
		t.Errorf("Import: %v; want it to name the server", err)
	}
	checkNoCredentials(t, "Import's error", err.Error())
}

// TestImport_URLThatDoesNotParseIsNotShown: a URL that does not parse is
// refused, and its text, where its credentials are, is not shown.
func TestImport_URLThatDoesNotParseIsNotShown(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	for _, u := range []string{
		"http://me:" + urlPassword + "@127.0.0.1:1/%zz?token=" + urlToken,   // a bad escape in the path
		"http://me:" + urlPassword + "/x@127.0.0.1:1/mcp?token=" + urlToken, // a / in the password, which ends the host
		"http://127.0.0.1:1/mcp?token=" + urlToken + "\x7f",                 // a control character
	} {
		im, err := mcp.Import(context.Background(), rt, &mcp.ImportOptions{URL: u, KeepAlive: -1})
		if im != nil || err == nil {
			t.Fatalf("Import of %q: %v, %v; want an error", u, im, err)
		}
		if !strings.Contains(err.Error(), "URL") {
			t.Errorf("Import: %v; want it to say the URL is at fault", err)
		}
		checkNoCredentials(t, "Import's error", err.Error())
	}
}

// TestImport_ErrorOfACallShowsNoCredentials: a call whose POST fails
// (the server drops the connection) is answered with go-sdk's error,
// which quotes the URL with its query, and one the server refuses with
// an error quoting the credentials it was sent (the bearer token, the
// query's token, the password, unescaped) with that error; the error
// result, and what the import logs, show none of them.
func TestImport_ErrorOfACallShowsNoCredentials(t *testing.T) {
	for _, c := range []struct {
		name string
		call func(w http.ResponseWriter, r *http.Request, id json.RawMessage)
		want string // in the error result
	}{
		{"dropped", func(w http.ResponseWriter, _ *http.Request, _ json.RawMessage) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				panic(err)
			}
			_ = conn.Close() // no answer: the client's POST fails
		}, "token=xxxxx"},
		{"quoted", func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
			writeRPCError(w, id, fmt.Sprintf("refused %s with token %s from %s", r.Header.Get("Authorization"), r.URL.Query().Get("token"), urlPassword))
		}, "refused Bearer xxxxx with token xxxxx from xxxxx"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := postServer(t, nil, func(w http.ResponseWriter, r *http.Request, body []byte) {
				if id, method := rpcOf(body); method == "tools/call" {
					c.call(w, r, id)
					return
				}
				writeBound(w, body)
			})
			var logs syncbuf.Buffer
			rt := actorstest.NewRuntime(t, nil)
			im := imported(t, rt, &mcp.ImportOptions{URL: withCredentials(srv.URL), KeepAlive: -1, BearerToken: urlBearer,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			res := runLoop(t, rt, im.Tools(),
				scripted.Turn{ToolCalls: []scripted.ToolCall{{ID: "c", Name: "bounded", Arguments: `{"n":1}`}}},
				scripted.Turn{Text: "done"})
			f := res["c"]
			if f == nil || !f.IsErrorResult() {
				t.Fatalf("call: %v; want an error result", f)
			}
			if !bytes.Contains(f.GetPayload(), []byte(c.want)) {
				t.Errorf("call: %s; want its error to hold %q", f.GetPayload(), c.want)
			}
			checkNoCredentials(t, "the call's error", string(f.GetPayload()))
			checkNoCredentials(t, "the log", logs.String())
		})
	}
}

// TestImport_ErrorOfARefusingProxyShowsNoCredentials: the transport
// sends the proxy of an https URL the password of the proxy's URL, as
// basic auth in the CONNECT that opens the tunnel, and a proxy refusing
// it may quote it in its reason, which is then the transport's error;
// Import's error shows neither the password nor the basic auth.
func TestImport_ErrorOfARefusingProxyShowsNoCredentials(t *testing.T) {
	const proxyPassword = "proxy-pass-4815162342"
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		defer conn.Close()
		_, _ = fmt.Fprintf(buf, "HTTP/1.1 407 refused %s\r\nContent-Length: 0\r\n\r\n", r.Header.Get("Proxy-Authorization"))
		_ = buf.Flush()
	}))
	t.Cleanup(proxy.Close)
	u, err := url.Parse(proxy.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("me", proxyPassword)
	o := &mcp.ImportOptions{URL: "https://mcp.example:8443/mcp", KeepAlive: -1}
	mcp.WithProxy(o, u)
	rt := actorstest.NewRuntime(t, nil)
	im, err := mcp.Import(context.Background(), rt, o)
	if im != nil || err == nil {
		t.Fatalf("Import: %v, %v; want an error", im, err)
	}
	if !strings.Contains(err.Error(), "refused Basic xxxxx") {
		t.Errorf("Import: %v; want the proxy's reason, its credential cut out", err)
	}
	basic := base64.StdEncoding.EncodeToString([]byte("me:" + proxyPassword))
	if strings.Contains(err.Error(), proxyPassword) || strings.Contains(err.Error(), basic) {
		t.Errorf("Import: %v; shows the proxy's credential", err)
	}
}

// TestImport_URLsUserNameIsNotShown: a token may be given as the user
// name of the URL (https://TOKEN@host/, or TOKEN:x-oauth-basic), which
// the HTTP client sends as basic auth. Neither the token nor that basic
// auth shows in the error of an Import whose server is not reached (which
// names the URL, its host whole), of a call the server refuses quoting
// the Authorization header it got, or of a Close whose DELETE the server
// refuses (which names the URL too).
func TestImport_URLsUserNameIsNotShown(t *testing.T) {
	const token = "user-token-2718281828"
	for _, user := range []string{token, token + ":x-oauth-basic"} {
		t.Run(user, func(t *testing.T) {
			basic := base64.StdEncoding.EncodeToString([]byte(user))
			if !strings.Contains(user, ":") {
				basic = base64.StdEncoding.EncodeToString([]byte(user + ":"))
			}
			check := func(what, text string) {
				t.Helper()
				if strings.Contains(text, token) || strings.Contains(text, basic) {
					t.Errorf("%s shows the URL's user name or its basic auth: %s", what, text)
				}
			}
			withUser := func(base string) string { return strings.Replace(base, "://", "://"+user+"@", 1) + "/mcp" }

			gone := httptest.NewServer(http.NotFoundHandler())
			host := strings.TrimPrefix(gone.URL, "http://")
			gone.Close() // nothing listens there now
			rt := actorstest.NewRuntime(t, nil)
			im, err := mcp.Import(context.Background(), rt, &mcp.ImportOptions{URL: withUser(gone.URL), KeepAlive: -1})
			if im != nil || err == nil {
				t.Fatalf("Import: %v, %v; want an error", im, err)
			}
			if !strings.Contains(err.Error(), "@"+host+"/mcp") {
				t.Errorf("Import: %v; want it to name the server", err)
			}
			check("Import's error", err.Error())

			srv := postServer(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) },
				func(w http.ResponseWriter, r *http.Request, body []byte) {
					switch id, method := rpcOf(body); method {
					case "initialize":
						w.Header().Set("Mcp-Session-Id", "s1")
					case "tools/call":
						writeRPCError(w, id, "refused "+r.Header.Get("Authorization"))
						return
					}
					writeBound(w, body)
				})
			im, err = mcp.Import(context.Background(), rt, &mcp.ImportOptions{URL: withUser(srv.URL), KeepAlive: -1})
			if err != nil {
				t.Fatal(err)
			}
			res := runLoop(t, rt, im.Tools(),
				scripted.Turn{ToolCalls: []scripted.ToolCall{{ID: "c", Name: "bounded", Arguments: `{"n":1}`}}},
				scripted.Turn{Text: "done"})
			f := res["c"]
			if f == nil || !f.IsErrorResult() || !bytes.Contains(f.GetPayload(), []byte("refused Basic ")) {
				t.Fatalf("call: %v; want an error result quoting the server", f)
			}
			check("the call's error", string(f.GetPayload()))
			err = im.Close(context.Background())
			if err == nil || !strings.Contains(err.Error(), "@"+strings.TrimPrefix(srv.URL, "http://")+"/mcp") {
				t.Fatalf("Close: %v; want the refused DELETE, naming the server", err)
			}
			check("Close's error", err.Error())
		})
	}
}

// rpcOf returns the id and method of the JSON-RPC request body.
func rpcOf(body []byte) (id json.RawMessage, method string) {
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	_ = json.Unmarshal(body, &req)
	return req.ID, req.Method
}

// writeRPCError answers the JSON-RPC request id with an error saying
// message.
func writeRPCError(w http.ResponseWriter, id json.RawMessage, message string) {
	msg, _ := json.Marshal(message)
	w.Header().Set("Content-Type", "application/json")
	_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":%s}}`, id, msg)
}
