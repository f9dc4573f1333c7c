// Package httpadapter is what the HTTP model adapters (models/anthropic
// and models/openai) share besides the actor shell of models/streaming:
// the defaults of their options, the HTTP client they make, the bounds of
// an answer, the resilience events they put on the stream, and the frames
// that end an answer. It has no dependency on any provider's SDK, so that
// neither adapter pulls in the other's.
package httpadapter

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"

	"github.com/polyweave/polyweave-go/internal/origin"
	"github.com/polyweave/polyweave-go/internal/urlredact"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/resilience"
	"github.com/polyweave/polyweave-go/models/streaming"
)

// NoRetries, as Config.MaxRetries, turns the SDK's retries off.
const NoRetries = -1

// The defaults of Config's bounds.
const (
	DefaultTimeout     = 10 * time.Minute
	DefaultIdleTimeout = 3 * time.Minute
)

// Config is the part of an adapter's options both adapters share; a zero
// field means the default.
type Config struct {
	Timeout     time.Duration
	IdleTimeout time.Duration
	MaxRetries  int
	HTTPClient  *http.Client
	Logger      *slog.Logger
	// APIKey is the key the adapter sends; the errors of its answers
	// never repeat it (see [Endpoint.Answer]): whole or clipped when it
	// has 8 bytes or more, as a word when shorter, and only where it is
	// quoted as a credential when shorter than 4 bytes (redactQuoted).
	APIKey string
	// BaseURL is the API root; the errors of the answers never repeat
	// the password of its user info either, plain or as the base64 of
	// the basic auth the HTTP client sends with it, nor its user name,
	// which may be a token (https://TOKEN@host/): whole when it has 8
	// bytes or more, and only where it is quoted as a credential when
	// shorter (a short user name is no token). The user info of every
	// URL an error names is cut out, whatever it holds, and so are the
	// values of its query and fragment (internal/urlredact).
	BaseURL string
}

// Valid reports whether c holds no negative bound or retry count (the
// adapters say so in their own words).
func (c Config) Valid() bool {
	return c.Timeout >= 0 && c.IdleTimeout >= 0 && c.MaxRetries >= NoRetries
}

// Retries says what retry count to give the SDK: ok is false when the
// SDK's default stands.
func (c Config) Retries() (n int, ok bool) {
	switch {
	case c.MaxRetries == NoRetries:
		return 0, true
	case c.MaxRetries > 0:
		return c.MaxRetries, true
	}
	return 0, false
}

// Endpoint is what a Model keeps of its Config. Its methods are safe for
// concurrent use.
type Endpoint struct {
	timeout time.Duration
	idle    time.Duration
	client  *http.Client
	own     *http.Client // the client Open made, if it did
	logger  *slog.Logger
	fixed   *credentials // the API key and base URL's user info, cut out of error texts
	// transport is the *http.Transport at the bottom of the client, when
	// known (see transportOf): what it sends a proxy (the user info of the
	// proxy's URL, its ProxyConnectHeader or the headers of its
	// GetProxyConnectHeader) are credentials too.
	transport *http.Transport
}

// Open fills in the defaults of a valid c and returns its endpoint: with
// no HTTPClient, one of its own on a clone of http.DefaultTransport.
func Open(c Config) *Endpoint {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	e := &Endpoint{timeout: c.Timeout, idle: c.IdleTimeout, client: c.HTTPClient, logger: c.Logger}
	e.fixed = configCredentials(c)
	if e.client == nil {
		e.own = streaming.NewHTTPClient(c.IdleTimeout)
		e.client = e.own
	}
	e.client = dropCredentialsOnRedirect(e.client)
	if c.HTTPClient == nil || c.HTTPClient.CheckRedirect == nil {
		next := e.client.Transport
		if next == nil {
			next = http.DefaultTransport // as http.Client's
		}
		e.client.Transport = sameOriginRedirects{next: next}
	}
	e.transport = transportOf(e.client.Transport)
	return e
}

// dropCredentialsOnRedirect returns a copy of c whose redirects to
// another origin (scheme, host and port) than the request's go without
// the headers that may carry credentials (see [credentialName]: X-Api-Key,
// Api-Key and the others an adapter's RequestOptions may add, which
// http.Client keeps on a redirect to another host, and Authorization,
// which it keeps on one to a subdomain or another port), then are
// checked by c's CheckRedirect (or stopped after 10, as http.Client
// does). Back on the request's origin, they are sent again: http.Client
// copies each redirect's headers from the request's.
func dropCredentialsOnRedirect(c *http.Client) *http.Client {
	check := c.CheckRedirect
	copied := *c
	copied.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !origin.Same(req.URL, via[0].URL) {
			for name := range req.Header {
				if credentialName(name) {
					req.Header.Del(name)
				}
			}
		}
		if check != nil {
			return check(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &copied
}

// sameOriginRedirects fails a request that the server redirects to
// another origin than the first request's (scheme, host and port), with
// any status, before http.Client sees the redirect: the request's body is
// the prompt, which is for the API's server alone. The error says the
// method and the status, not the place the redirect points to, which the
// server writes as it likes (a token in its query). On the origin, it
// fails a request other than a GET or HEAD redirected with 301, 302 or
// 303, which http.Client would send on as a GET without its body: what
// answered that GET is no answer to the prompt, and the adapter would
// read it as the model's. That error names the place (the origin's, the
// values of its query and fragment cut: urlredact.URL). 307 and 308 keep
// the method and the body, and are followed on the origin. It stands
// under the client of an endpoint unless the Config's client has a
// CheckRedirect of its own, which then decides (it sees the GET
// http.Client would send).
type sameOriginRedirects struct{ next http.RoundTripper }

func (s sameOriginRedirects) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := s.next.RoundTrip(r)
	if err != nil {
		return res, err
	}
	switch {
	case leavesOrigin(r, res):
		err = fmt.Errorf("the server redirected the %s with HTTP %d %s to another origin (or to a URL that does not parse): not followed",
			r.Method, res.StatusCode, http.StatusText(res.StatusCode))
	case dropsBody(r, res):
		to, _ := r.URL.Parse(res.Header.Get("Location")) // it parses: it does not leave the origin
		err = fmt.Errorf("the server redirected the %s with HTTP %d %s to %s, which would send it on as a GET without its body: not followed",
			r.Method, res.StatusCode, http.StatusText(res.StatusCode), urlredact.URL(to))
	default:
		return res, nil
	}
	_ = res.Body.Close()
	err = models.Permanent(err)
	// The SDKs retry a request that failed without a response, whatever
	// the error: the answer ends here, which stops them.
	if b, ok := r.Context().Value(boundsKey{}).(*streaming.Bounds); ok {
		b.End(err)
	}
	return nil, err
}

// leavesOrigin reports whether res, the answer to r, is a redirect
// http.Client would follow (a status it follows, with a Location) to
// another origin than that of the first request of r's chain, its
// Location read against r's URL (origin.Leaves).
//
// The first request is found back along the responses of the redirects
// http.Client followed, through their Request, which http.Transport sets
// but a RoundTripper need not (http.Client does not). Where it is nil,
// the search stops at a later request of the chain: that one is on the
// first's origin all the same, since sameOriginRedirects stands under
// every request of the chain and refused each redirect that left it.
func leavesOrigin(r *http.Request, res *http.Response) bool {
	first := r
	for first.Response != nil && first.Response.Request != nil { // back along the redirects http.Client followed
		first = first.Response.Request
	}
	return origin.Leaves(res, r.URL, first.URL)
}

// dropsBody reports whether res, the answer to r, is a redirect
// http.Client would follow with a GET without r's body: a 301, 302 or
// 303, with a Location, of a request other than a GET or HEAD.
func dropsBody(r *http.Request, res *http.Response) bool {
	switch res.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther:
		return r.Method != http.MethodGet && r.Method != http.MethodHead && res.Header.Get("Location") != ""
	}
	return false
}

func (s sameOriginRedirects) Unwrap() http.RoundTripper { return s.next }

// CloseIdleConnections closes the idle connections of the transport
// under s, as http.Client.CloseIdleConnections does of its own.
func (s sameOriginRedirects) CloseIdleConnections() {
	if c, ok := s.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// transportOf returns rt when it is an *http.Transport
// (http.DefaultTransport when nil), or the one it wraps, as a
// resilience.Transport does, behind Unwrap methods; nil otherwise.
func transportOf(rt http.RoundTripper) *http.Transport {
	if rt == nil {
		rt = http.DefaultTransport
	}
	for range 16 { // a bound, should wrappers ever loop
		switch t := rt.(type) {
		case *http.Transport:
			return t
		case interface{ Unwrap() http.RoundTripper }:
			rt = t.Unwrap()
		default:
			return nil
		}
	}
	return nil
}

// HTTPClient is the client to send requests with: the Config's (or the
// one Open made), copied with a redirect to another origin dropping the
// credential headers (see dropCredentialsOnRedirect), and not followed,
// nor one on the origin that would drop the request's body, unless the
// Config's client has a CheckRedirect (see sameOriginRedirects).
func (e *Endpoint) HTTPClient() *http.Client { return e.client }

// Close releases the idle connections of the client Open made (none when
// the Config gave one).
func (e *Endpoint) Close() {
	if e.own != nil {
		e.own.CloseIdleConnections()
	}
}

// Bound returns the bounds of one answer (streaming.Bound with the
// endpoint's timeouts) and the context to make its request with. Sent
// through an SDK client with [BetweenRetries] as middleware, the request's
// idle clock stands during the SDK's waits before a retry. A request
// made with it whose redirect the endpoint's client refuses to follow
// (to another origin, or as a GET without its body: see
// sameOriginRedirects) ends the answer, with that refusal as
// its cause (Bounds.Fail gives it): the SDKs retry any request that
// failed without a response, and would send the prompt again for
// nothing.
func (e *Endpoint) Bound(ctx context.Context) (*streaming.Bounds, context.Context) {
	b, ctx := streaming.Bound(ctx, e.timeout, e.idle)
	ctx = context.WithValue(ctx, boundsKey{}, b)
	return b, context.WithValue(ctx, retryWaitKey{}, &retryWait{})
}

type boundsKey struct{}

// BetweenRetries is the SDK middleware (called for each attempt of a
// request) that stops the idle clock of a request made with
// [Endpoint.Bound]'s context from the end of an attempt that failed
// until the next attempt begins: the SDK's wait before a retry (its
// backoff, or the server's Retry-After, up to seconds) has nothing on
// the wire, as the waits of a resilience.Transport do not, and it counts
// against the answer's timeout only. An attempt ends when it fails
// without a response, or when the body of its error status is closed:
// the SDK reads the body of an error it does not retry first, on the
// wire, and a server stalling in it is bounded as in any other body.
func BetweenRetries(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	w, _ := req.Context().Value(retryWaitKey{}).(*retryWait)
	if w == nil {
		return next(req)
	}
	w.end() // back on the wire: the clock runs from zero (Bounds.wait)
	res, err := next(req)
	switch {
	case err != nil:
		w.begin(req.Context())
	case res.StatusCode >= 400 && res.Body != nil:
		res.Body = &waitOnClose{ReadCloser: res.Body, w: w, ctx: req.Context()}
	case res.StatusCode >= 400:
		w.begin(req.Context())
	}
	return res, err
}

// waitOnClose is the body of an attempt's error status: closing it ends
// the attempt, and the SDK's wait before a retry (if any) begins.
type waitOnClose struct {
	io.ReadCloser
	w   *retryWait
	ctx context.Context
}

func (b *waitOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.w.begin(b.ctx)
	return err
}

type retryWaitKey struct{}

// retryWait is the wait of one request between two of its attempts.
type retryWait struct {
	mu   sync.Mutex
	done func() // of the wait under way, or nil
}

func (w *retryWait) begin(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done == nil {
		w.done = resilience.Waiting(ctx)
	}
}

func (w *retryWait) end() {
	w.mu.Lock()
	done := w.done
	w.done = nil
	w.mu.Unlock()
	if done != nil {
		done()
	}
}

// Logger is the logger for the request of ctx: the Config's, or else the
// adapter actor's (streaming.Logger).
func (e *Endpoint) Logger(ctx context.Context) *slog.Logger {
	if e.logger != nil {
		return e.logger
	}
	return streaming.Logger(ctx)
}

// Answer returns the streaming.AnswerFunc of an adapter that writes the
// body of each request with body and sends it with send. A body it cannot
// write fails the request as permanent: the same request cannot be sent
// again either. While send runs, the waits and retries of a
// resilience.Transport show on the stream as META resilience.MetaEvent
// frames. No frame carries a credential: the API key of e's Config, the
// user info of its base URL (the password, plain and in basic auth, and
// the user name), what the SDK
// middleware [Credentials] noted of the attempts of the request
// (credentials added by an adapter's RequestOptions), and what the
// request's headers carried on the wire (credentials a transport of the
// HTTP client added below the SDK, such as an OAuth2 transport's token:
// the *http.Transport at the bottom reports each header it writes), and
// the credentials of that transport's ProxyConnectHeader, or of the
// headers its GetProxyConnectHeader returns (which it sends a proxy in
// the CONNECT of an https request, where no trace hears them) are cut
// out of the text of send's errors and of the retry events' (some
// servers and proxies quote the credentials they refuse); so are the
// query strings of the request's URLs, and the user info (whatever it
// holds) and the values of the query and fragment of every URL they
// name, one the server wrote too (a redirect's Location), by the rule
// of internal/urlredact. Credentials a transport sends other than
// through an *http.Transport, with the request's context, are not
// seen; nor are the headers of a GetProxyConnectHeader that returns
// other credentials each time it is called (see [Credentials]). The
// error Answer returns does not unwrap to send's, whose errors may hold
// what its text cuts out (see [WithText]): errors.Is and
// models.IsPermanent find in it what they find in send's error, and
// errors.As only the errors send marked [Scrubbed].
func (e *Endpoint) Answer(body func(*models.Request) ([]byte, error), send func(ctx context.Context, streamID string, body []byte, emit func(*messages.Frame)) ([]*messages.Frame, error)) streaming.AnswerFunc {
	return func(ctx context.Context, req *models.Request, emit func(*messages.Frame)) ([]*messages.Frame, error) {
		sent := newCredentials(e.transport)
		ctx = context.WithValue(ctx, credentialsKey{}, sent)
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteHeaderField: sent.wroteHeader})
		redact := func(text string) string { return e.redact(text, sent) }
		ctx = context.WithValue(ctx, redactKey{}, redact)
		frames, err := answerWith(body, send, redact)(ctx, req, emit)
		if err != nil {
			err = WithText(err, redact(err.Error()))
		}
		return frames, err
	}
}

type redactKey struct{}

// Redact returns text, of an error of the request of ctx (made with
// [Endpoint.Answer]'s context), with what Answer cuts out of the request's
// error cut out of it: for the fields of an error a caller may reach
// under the error's text, by errors.As. Call it once the request was
// sent: it knows what the request's attempts carried so far.
func Redact(ctx context.Context, text string) string {
	if redact, ok := ctx.Value(redactKey{}).(func(string) string); ok {
		return redact(text)
	}
	return text
}

// RedactJSON returns raw, a JSON value of an error of the request of
// ctx (an error object a server sent), with what [Redact] cuts out cut
// out of each of its strings (keys and values, as they read decoded: a
// server may escape a credential's characters, "\/" for '/') and of
// each of its numbers (one that held a credential becomes the string its
// text is cut to), its structure kept: valid JSON, compact, in the
// order it came. When raw is not valid JSON, or a credential stands
// across its strings (where no one string holds it), it is the JSON
// string of raw's text cut as Redact cuts it.
func RedactJSON(ctx context.Context, raw []byte) json.RawMessage {
	redact := func(s string) string { return Redact(ctx, s) }
	out, err := redactJSON(raw, redact)
	if err == nil && redact(string(out)) == string(out) {
		return out
	}
	text, _ := json.Marshal(redact(string(raw))) // a string always encodes
	return text
}

// redactJSON returns the JSON value raw with redact applied to each of
// its strings and numbers, as RedactJSON says.
func redactJSON(raw []byte, redact func(string) string) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	writeString := func(s string) {
		_ = enc.Encode(s)           // a string always encodes
		out.Truncate(out.Len() - 1) // Encode's newline
	}
	type open struct {
		object bool
		n      int // the keys and values written in it
	}
	var stack []open
	values := 0 // at the top
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			out.WriteByte(byte(d))
			continue
		}
		if len(stack) == 0 {
			if values++; values > 1 {
				return nil, errors.New("more than one JSON value")
			}
		} else {
			top := &stack[len(stack)-1]
			switch {
			case top.object && top.n%2 == 1:
				out.WriteByte(':')
			case top.n > 0:
				out.WriteByte(',')
			}
			top.n++
		}
		switch v := tok.(type) {
		case json.Delim:
			out.WriteByte(byte(v))
			stack = append(stack, open{object: v == '{'})
		case string:
			writeString(redact(v))
		case json.Number:
			if r := redact(v.String()); r != v.String() {
				writeString(r)
			} else {
				out.WriteString(r)
			}
		case bool:
			out.WriteString(strconv.FormatBool(v))
		case nil:
			out.WriteString("null")
		}
	}
	if values == 0 || !json.Valid(out.Bytes()) {
		return nil, errors.New("not a JSON value")
	}
	return out.Bytes(), nil
}

// redact returns text with the credentials of e and sent cut out, the
// query strings of the URLs sent, and the user info and the values of
// the query and fragment of every URL (urlredact.Text: a URL may be one
// the server wrote, a redirect's Location http.Client names).
func (e *Endpoint) redact(text string, sent *credentials) string {
	sent.mu.Lock()
	queries := slices.Clone(sent.queries)
	secrets := append(slices.Clone(e.fixed.secrets), sent.secrets...)
	names := append(slices.Clone(e.fixed.names), sent.names...)
	sent.mu.Unlock()
	for _, q := range queries {
		text = strings.ReplaceAll(text, "?"+q, "") // as http.Client's errors name the URL
	}
	text = urlredact.Text(text)
	for _, name := range names {
		if len(name) >= minSecret {
			text = redact(text, name)
		} else {
			text = redactQuoted(text, name)
		}
	}
	for _, secret := range secrets {
		switch {
		case len(secret) >= minSecret:
			text = redact(text, secret)
		case len(secret) >= minWord:
			text = redactWord(text, secret)
		default:
			text = redactQuoted(text, secret)
		}
	}
	return text
}

// Credentials is the SDK middleware, to be applied after every other
// (so that it sees each attempt as sent), that notes the credentials of
// a request sent with the context of an [Endpoint.Answer]: the values of
// its headers that carry them (Authorization and Proxy-Authorization,
// past their scheme, the password of basic auth, and the credential
// parameters of other schemes; each cookie of a Cookie header; X-Api-Key,
// Api-Key and any other whose name speaks of a key, token, secret,
// password, signature, session or cookie, whole), the values of its query parameters so
// named (escaped as sent, and unescaped), its whole query string, the
// user info of its URL, and the user info of the proxy the endpoint's
// *http.Transport (behind a resilience.Transport too) sends it through:
// the password, plain and as the basic auth made of it, and the user
// name (see [credentials.userinfo]), and for an https request through
// such a proxy the credentials of the headers the transport's
// GetProxyConnectHeader returns for it. Answer cuts them out of the
// request's error.
//
// The transport calls GetProxyConnectHeader as it opens a tunnel, with
// what it returns going to the proxy alone; Credentials calls it too, as
// the transport would (with the request's context, the proxy's URL and
// the target's host and port), once for each attempt of a request, so
// that the function is called whether or not the attempt opens a
// tunnel. It must be safe for concurrent use, as the transport's calls
// require too; a function that returns other credentials each time
// (fresh ones per tunnel) has those it gave the transport missed.
func Credentials(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	if c, _ := req.Context().Value(credentialsKey{}).(*credentials); c != nil {
		c.note(req)
	}
	return next(req)
}

type credentialsKey struct{}

// credentials are those the attempts of one request carried.
type credentials struct {
	mu      sync.Mutex
	secrets []string
	names   []string // user names (see userinfo)
	queries []string // raw query strings
	// transport is the endpoint's *http.Transport, or nil.
	transport *http.Transport
}

// newCredentials returns the credentials of a request sent through t (nil
// when not known), with those it sends whatever the request: the
// headers of its ProxyConnectHeader, when it has a proxy. It sends them
// in the CONNECT that opens the tunnel of an https request, which no
// ClientTrace hears (it is not the request's), and a proxy may quote them
// as it refuses the tunnel: the transport's error is then the reason of
// the proxy's status. (The headers of a GetProxyConnectHeader function,
// which the transport sends instead, are noted for each request: see
// note.)
func newCredentials(t *http.Transport) *credentials {
	c := &credentials{transport: t}
	if t != nil && t.Proxy != nil {
		for name, values := range t.ProxyConnectHeader {
			c.header(name, values)
		}
	}
	return c
}

func (c *credentials) note(req *http.Request) {
	// What the transport sends the proxy, after every middleware: a proxy
	// may quote it as it refuses it. The user's functions are called
	// without holding c.mu.
	var proxy *url.URL
	var connect http.Header
	if t := c.transport; t != nil && t.Proxy != nil {
		if u, err := t.Proxy(req); err == nil && u != nil {
			proxy = u
			connect = proxyConnectHeader(t, req, u)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, values := range req.Header {
		c.header(name, values)
	}
	if proxy != nil {
		c.userinfo(proxy.User) // sent as basic auth
		for name, values := range connect {
			c.header(name, values)
		}
	}
	if u := req.URL; u != nil {
		c.userinfo(u.User)
		if u.RawQuery != "" && !slices.Contains(c.queries, u.RawQuery) {
			c.queries = append(c.queries, u.RawQuery)
			for pair := range strings.SplitSeq(u.RawQuery, "&") {
				name, value, _ := strings.Cut(pair, "=")
				if n, err := url.QueryUnescape(name); err == nil {
					name = n
				}
				if !credentialName(name) {
					continue
				}
				// As sent (a server quoting the query repeats it escaped)
				// and as meant (one quoting the parameter, unescaped).
				c.add(value)
				if v, err := url.QueryUnescape(value); err == nil {
					c.add(v)
				}
			}
		}
	}
}

// proxyConnectHeader returns the headers t's GetProxyConnectHeader (when
// set) gives for the CONNECT that opens a tunnel through proxy to the
// target of req, called as the transport calls it: only for an https
// request through a proxy that is not SOCKS, with the proxy's URL and
// the target's host (in ASCII) and port. It returns nil otherwise, and
// when the function fails (the transport fails the request then).
func proxyConnectHeader(t *http.Transport, req *http.Request, proxy *url.URL) http.Header {
	if t.GetProxyConnectHeader == nil || req.URL == nil || req.URL.Scheme != "https" ||
		proxy.Scheme == "socks5" || proxy.Scheme == "socks5h" {
		return nil
	}
	host := req.URL.Hostname()
	if !isASCII(host) { // as the transport writes the target
		if a, err := idna.Lookup.ToASCII(host); err == nil {
			host = a
		}
	}
	port := req.URL.Port()
	if port == "" {
		port = "443"
	}
	h, err := t.GetProxyConnectHeader(req.Context(), proxy, net.JoinHostPort(host, port))
	if err != nil {
		return nil
	}
	return h
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// wroteHeader is the httptrace hook of a request's header fields as
// they go on the wire.
func (c *credentials) wroteHeader(name string, values []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.header(name, values)
}

// header notes the credentials of a header field. HTTP/2's pseudo-header
// fields (":authority", the host) are none. An Authorization header
// (Proxy-Authorization too) gives the credential past its scheme, which
// stays readable ("Bearer [redacted]"), the password of basic auth, and
// the values of the parameters of a scheme that has them (AWS's
// Signature and Credential, Digest's response), which a server may quote
// alone; a Cookie header, each cookie's value and then the cookie whole
// (one too short to be cut out wherever it stands is cut out with its
// name); any other (X-Api-Key, Api-Key), its whole value.
func (c *credentials) header(name string, values []string) {
	if strings.HasPrefix(name, ":") || !credentialName(name) {
		return
	}
	for _, v := range values {
		v = strings.TrimSpace(v)
		switch {
		case strings.EqualFold(name, "Cookie"):
			// HTTP/1 sends a client's cookies in one field ("a=1; b=2"),
			// HTTP/2 in one field each.
			for cookie := range strings.SplitSeq(v, ";") {
				cookie = strings.TrimSpace(cookie)
				if _, value, ok := strings.Cut(cookie, "="); ok {
					c.add(unquote(strings.TrimSpace(value)))
				}
				c.add(cookie)
			}
		case authorizationName(name):
			c.authorization(v)
		default:
			c.add(v)
		}
	}
}

// authorization notes the credentials of an Authorization header's value.
func (c *credentials) authorization(v string) {
	scheme, rest, ok := strings.Cut(v, " ")
	if !ok {
		if !slices.ContainsFunc(authSchemes, func(s string) bool { return strings.EqualFold(s, v) }) {
			c.add(v) // a credential with no scheme; a scheme with no credential is none
		}
		return
	}
	rest = strings.TrimSpace(rest)
	c.add(rest) // the token past its scheme: "Bearer [redacted]" still says the scheme
	if strings.EqualFold(scheme, "Basic") {
		if b, err := base64.StdEncoding.DecodeString(rest); err == nil {
			if user, password, ok := strings.Cut(string(b), ":"); ok {
				c.add(password)
				c.name(user)
			}
		}
		return
	}
	// Parameters (name=value, comma-separated); a token68 ("abc==") has
	// no value past its first '='.
	for param := range strings.SplitSeq(rest, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(param), "=")
		value = strings.TrimSpace(value)
		if ok && value != "" && value[0] != '=' && (credentialName(name) || strings.EqualFold(name, "response")) {
			c.add(unquote(value))
		}
	}
}

// authorizationName reports whether a header of this name has an auth
// scheme before its credential: Authorization, Proxy-Authorization, and
// others so named.
func authorizationName(name string) bool {
	const suffix = "authorization"
	return len(name) >= len(suffix) && strings.EqualFold(name[len(name)-len(suffix):], suffix)
}

// unquote returns s without the double quotes around it, if any.
func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}

func (c *credentials) add(secret string) {
	if secret != "" && !slices.Contains(c.secrets, secret) {
		c.secrets = append(c.secrets, secret)
	}
}

// userinfo notes the credentials of u (none when nil), the user info of
// a URL, which the HTTP client sends its server (or the transport its
// proxy) as basic auth, even with no password: the password, the base64
// of that basic auth, and the user name, which may be a token
// (https://TOKEN@host/, or TOKEN:x-oauth-basic).
func (c *credentials) userinfo(u *url.Userinfo) {
	if u == nil {
		return
	}
	password, _ := u.Password()
	c.add(password)
	c.add(base64.StdEncoding.EncodeToString([]byte(u.Username() + ":" + password)))
	c.name(u.Username())
}

// name notes a user name. One as long as a secret (minSecret) is cut out
// wherever it stands; a shorter one only where it is quoted as a
// credential (redactQuoted): it is no token, and cut out as a word it
// would cut ordinary words ("admin", "gateway") out of the text.
func (c *credentials) name(n string) {
	if n != "" && !slices.Contains(c.names, n) {
		c.names = append(c.names, n)
	}
}

// credentialName reports whether a header or query parameter of this
// name may carry a credential. It is asked of every header field a
// request writes: it does not allocate.
func credentialName(name string) bool {
	for _, word := range credentialWords {
		for i := 0; i+len(word) <= len(name); i++ {
			if strings.EqualFold(name[i:i+len(word)], word) {
				return true
			}
		}
	}
	return false
}

var credentialWords = []string{"auth", "key", "token", "secret", "password", "signature", "session", "cookie", "credential"}

// configCredentials returns what the errors of c's answers must not
// repeat: the API key, and the base URL's user info (its password, plain
// and as the base64 of the basic auth it makes, the Authorization header
// a server may quote, and its user name).
func configCredentials(c Config) *credentials {
	all := &credentials{}
	all.add(c.APIKey)
	if u, err := url.Parse(c.BaseURL); err == nil {
		all.userinfo(u.User)
	}
	return all
}

// redact returns text with secret, of at least minSecret bytes, cut out:
// where it is whole, and where
// a quote of a body clipped by [Quote], or a message clipped by
// [Message], ends with its first bytes (a server quoting the key may have
// put it across the clip).
func redact(text, secret string) string {
	text = strings.ReplaceAll(text, secret, redacted)
	for i := 0; ; {
		j := strings.Index(text[i:], ellipsis)
		if j < 0 {
			return text
		}
		j += i
		i = j + len(ellipsis)
		if strings.HasSuffix(text[:j], `"`) {
			j-- // the end of a quote
		}
		for k := len(secret) - 1; k >= minCut; k-- {
			if strings.HasSuffix(text[:j], secret[:k]) {
				text = text[:j-k] + redacted + text[j:]
				i += len(redacted) - k
				break
			}
		}
	}
}

// redactWord returns text with secret, shorter than minSecret, cut out
// where it stands as a word: not where letters, digits, '_' or '-' go on
// either side of it, so that a short key ("test") leaves the words that
// hold it ("latest", "test-model") whole.
func redactWord(text, secret string) string { return redactWhere(text, secret, asWord) }

// redactQuoted returns text with secret, shorter than minWord, cut out
// where a server quotes a credential: whole between quotes ("x", 'x',
// `x`), or as a word past an auth scheme ("Bearer x"). Cut out wherever
// it stands as a word, a key of one to three bytes would cut ordinary
// words ("a", "to", "key") out of the text, and it hides little: such a
// key is guessed in moments.
func redactQuoted(text, secret string) string { return redactWhere(text, secret, quoted) }

// redactWhere returns text with secret cut out where cut, given the text
// before and after it, says so.
func redactWhere(text, secret string, cut func(before, after string) bool) string {
	var b strings.Builder
	done := 0 // text[:done] is in b
	for i := 0; ; {
		j := strings.Index(text[i:], secret)
		if j < 0 {
			break
		}
		j += i
		end := j + len(secret)
		if !cut(text[:j], text[end:]) {
			i = j + 1
			continue
		}
		b.WriteString(text[done:j])
		b.WriteString(redacted)
		done, i = end, end
	}
	if done == 0 {
		return text
	}
	return b.String() + text[done:]
}

// asWord reports whether what stands between before and after is a word
// of its own.
func asWord(before, after string) bool {
	last, _ := utf8.DecodeLastRuneInString(before)
	next, _ := utf8.DecodeRuneInString(after)
	return (before == "" || !wordRune(last)) && (after == "" || !wordRune(next))
}

// quoted reports whether what stands between before and after is quoted
// as a credential: between a pair of the same quotes, or as a word past
// an auth scheme and a space.
func quoted(before, after string) bool {
	if before != "" && after != "" && before[len(before)-1] == after[0] && strings.IndexByte("\"'`", after[0]) >= 0 {
		return true
	}
	head, ok := strings.CutSuffix(before, " ")
	if !ok || !asWord(before, after) {
		return false
	}
	scheme := head[strings.LastIndexFunc(head, func(r rune) bool { return !unicode.IsLetter(r) })+1:]
	for _, s := range authSchemes {
		if strings.EqualFold(scheme, s) {
			return true
		}
	}
	return false
}

// authSchemes are the schemes of the Authorization headers servers quote.
var authSchemes = []string{"Bearer", "Basic", "Token"}

func wordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-' }

const (
	redacted = "[redacted]"
	ellipsis = "…" // after a quote Quote clipped, or a message Message did
	// minCut is the length from which the start of the key is cut out
	// before a clip: fewer bytes are at most a public prefix ("sk-").
	minCut = 4
)

// minSecret is the length from which a secret is cut out of error
// texts wherever it is; a shorter one (a local server's "test") is cut
// out only where it stands as a word, so as not to cut ordinary words,
// and one shorter than minWord ("x") only where it is quoted as a
// credential (redactQuoted).
const (
	minSecret = 8
	minWord   = 4
)

// WithText returns err said in other words, text, with the credentials
// cut out of it: errors.Is finds what it finds in err (context.Canceled,
// an adapter's sentinel errors), [models.IsPermanent] the mark, and
// errors.As the errors in err marked [Scrubbed], and nothing else of
// err: the errors under it (an *url.Error naming the URL with its user
// info, an SDK's error holding the request) keep what text cuts out.
func WithText(err error, text string) error {
	e := &textError{text: text, err: err, kept: scrubbedIn(err, nil)}
	if models.IsPermanent(err) {
		return models.Permanent(e)
	}
	return e
}

type textError struct {
	text string
	err  error   // not exposed: only asked whether it is a target
	kept []error // the errors of err marked Scrubbed
}

func (e *textError) Error() string        { return e.text }
func (e *textError) Is(target error) bool { return errors.Is(e.err, target) }
func (e *textError) Unwrap() []error      { return e.kept }

// scrubbedIn appends the errors marked Scrubbed in the tree of err to
// kept, not looking under them.
func scrubbedIn(err error, kept []error) []error {
	switch e := err.(type) {
	case nil:
	case *scrubbedError:
		kept = append(kept, e.err)
	case interface{ Unwrap() error }:
		kept = scrubbedIn(e.Unwrap(), kept)
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			kept = scrubbedIn(inner, kept)
		}
	}
	return kept
}

func answerWith(body func(*models.Request) ([]byte, error), send func(ctx context.Context, streamID string, body []byte, emit func(*messages.Frame)) ([]*messages.Frame, error), redact func(string) string) streaming.AnswerFunc {
	return func(ctx context.Context, req *models.Request, emit func(*messages.Frame)) ([]*messages.Frame, error) {
		b, err := body(req)
		if err != nil {
			return nil, models.Permanent(err)
		}
		// The failed attempt's error may quote what it sent: cut out
		// before the observer, and the transport's OnEvent, see it.
		ctx = resilience.WithRedaction(ctx, redact)
		ctx = resilience.WithObserver(ctx, func(ev resilience.Event) {
			payload, _ := json.Marshal(ev) // plain fields always encode
			emit(messages.Meta(req.StreamID, resilience.MetaEvent, payload))
		})
		return send(ctx, req.StreamID, b, emit)
	}
}

// Ending is what ends an answer, as an adapter's accumulator read it once
// its stream finished.
type Ending struct {
	// ToolCalls are the whole calls, Truncated the calls the length limit
	// cut off (Arguments: what arrived of them).
	ToolCalls []models.ToolCall
	Truncated []models.ToolCall
	// Thinking, when not nil, goes out as META models.MetaThinkingBlocks.
	Thinking json.RawMessage
	// Usage, when not nil, goes out as META usage.
	Usage  json.RawMessage
	Finish string
}

// Frames returns the frames that end the answer on streamID: the tool
// calls (atomic, with their index), the truncated calls, the thinking
// blocks, the usage and the finish reason.
func (e *Ending) Frames(streamID string) []*messages.Frame {
	frames := make([]*messages.Frame, 0, len(e.ToolCalls)+len(e.Truncated)+3)
	for _, tc := range e.ToolCalls {
		f := messages.ToolCall(streamID, tc.ID, tc.Name, tc.Arguments)
		f.Meta = &messages.Metadata{Index: uint32(tc.Index)}
		frames = append(frames, f)
	}
	for _, tc := range e.Truncated {
		frames = append(frames, models.TruncatedCallFrame(streamID, tc.ID, tc.Name, tc.Index, len(tc.Arguments)))
	}
	if e.Thinking != nil {
		frames = append(frames, messages.Meta(streamID, models.MetaThinkingBlocks, e.Thinking))
	}
	if e.Usage != nil {
		frames = append(frames, models.UsageFrame(streamID, e.Usage))
	}
	return append(frames, models.FinishFrame(streamID, e.Finish))
}

// CheckParam returns an error naming p when it cannot be sent as it is:
// its name is not UTF-8 (json.Marshal would send it changed, the bytes
// as U+FFFD), or its value is not JSON a server can take: not valid
// JSON, or holding bytes that are not UTF-8 (json.Valid lets those
// through inside strings, and servers refuse such a body with an error
// that does not say where).
func CheckParam(p models.Param) error {
	if !utf8.ValidString(p.Name) {
		return fmt.Errorf("param %q: its name is not UTF-8", p.Name)
	}
	if !json.Valid(p.Value) {
		return fmt.Errorf("param %q is not valid JSON", p.Name)
	}
	if !utf8.Valid(p.Value) {
		return fmt.Errorf("param %q is not valid JSON: it holds bytes that are not UTF-8", p.Name)
	}
	return nil
}

// KeyFromEnv returns the value of the environment variable name (def
// when name is empty), or an error wrapping noKey.
func KeyFromEnv(name, def string, noKey error) (string, error) {
	if name == "" {
		name = def
	}
	if v := os.Getenv(name); v != "" {
		return v, nil
	}
	return "", fmt.Errorf("%w: environment variable %s is empty", noKey, name)
}

// bodyQuote is how many bytes of an unexpected body an error quotes.
const bodyQuote = 200

// CheckEventStream returns an error wrapping notStream, and closes
// the body, when res is not server-sent events. A response without a
// Content-Type is read as events: some minimal servers send none, and
// the SDK's decoder reads any body as events.
func CheckEventStream(res *http.Response, notStream error) error {
	ct := res.Header.Get("Content-Type")
	if ct == "" {
		return nil
	}
	if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == "text/event-stream" {
		return nil
	}
	defer res.Body.Close()
	return fmt.Errorf("%w: HTTP %d with Content-Type %q, want text/event-stream; the body starts %s",
		notStream, res.StatusCode, Message(ct), BodyStart(res))
}

// BodyStart reads the start of res's body and quotes it for an error
// text: at most bodyQuote bytes, "…" when there is more, bytes that are
// not UTF-8 replaced; a failed read is said. It does not close the body.
func BodyStart(res *http.Response) string {
	if res == nil || res.Body == nil {
		return `""`
	}
	b, err := io.ReadAll(io.LimitReader(res.Body, bodyQuote+1))
	q := Quote(b)
	if err != nil {
		q += fmt.Sprintf(" (reading it failed: %v)", err)
	}
	return q
}

// Quote quotes the start of b for an error text: at most bodyQuote
// bytes, "…" when there is more, bytes that are not UTF-8 replaced.
func Quote(b []byte) string {
	more := ""
	if len(b) > bodyQuote {
		b, more = b[:clipAt(string(b), bodyQuote)], ellipsis
	}
	return strconv.Quote(strings.ToValidUTF8(string(b), "\uFFFD")) + more
}

// Message returns the start of s, a message a server sent, for an error
// text: at most MessageQuote bytes, "…" when there is more (the start of
// a secret before it is redacted as in a [Quote]).
func Message(s string) string {
	if len(s) <= MessageQuote {
		return s
	}
	return strings.ToValidUTF8(s[:clipAt(s, MessageQuote)], "\uFFFD") + ellipsis
}

// clipAt returns where to clip s, longer than max: at max, or a little
// before, so that the clip does not cut a character in two.
func clipAt(s string, max int) int {
	for i := max; i > max-utf8.UTFMax && i > 0; i-- {
		if utf8.RuneStart(s[i]) {
			return i
		}
	}
	return max
}

// StatusText is the text of an error for the HTTP error status of res,
// the answer to req: "HTTP 404 Not Found from POST
// http://host/v1/chat/completions: " and then message, what the API's
// error said, or when it is empty the quoted start of the body (which
// the SDKs leave readable). kind, when not empty, replaces the status's
// name (the Messages API's error type). The URL is written without its
// user info, query and fragment, where credentials may be; its path is
// kept, since it tells whether the base URL is right (a credential in it
// is cut out as anywhere else by [Endpoint.Answer]).
func StatusText(req *http.Request, res *http.Response, status int, kind, message string) string {
	if kind == "" {
		kind = http.StatusText(status)
	}
	kind, message = Message(kind), Message(message)
	text := fmt.Sprintf("HTTP %d %s", status, kind)
	if req != nil && req.URL != nil {
		u := *req.URL
		u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
		text += " from " + req.Method + " " + u.String()
	}
	if message == "" {
		return text + ": the body starts " + BodyStart(res)
	}
	return text + ": " + message
}

// MessageQuote is how many bytes of a message a server sent (with an
// error status, or in an error event) an error text keeps.
const MessageQuote = 1000

// Scrubbed marks err, an adapter's own error whose text and fields hold
// no credential (cut out as it was made, with [Redact]), as one the error
// of an answer keeps reachable by errors.As (see [WithText]).
func Scrubbed(err error) error { return &scrubbedError{err} }

type scrubbedError struct{ err error }

func (e *scrubbedError) Error() string { return e.err.Error() }
func (e *scrubbedError) Unwrap() error { return e.err }
