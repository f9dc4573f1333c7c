package mcp

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/polyweave/polyweave-go/internal/loopback"
)

// DefaultHTTPAddr is where [Server.ListenHTTP] binds by default: loopback
// only, on a free port.
const DefaultHTTPAddr = "127.0.0.1:0"

// HTTPOptions configure serving over streamable HTTP. A nil *HTTPOptions
// or a zero field means the default. Options are copied on entry.
type HTTPOptions struct {
	// Addr is the address ListenHTTP binds; default "127.0.0.1:0". An
	// address that is not loopback is refused unless AllowRemote is set.
	Addr string
	// AllowRemote serves clients beyond this machine: ListenHTTP binds an
	// address that is not loopback, and the handler serves clients that
	// are not on a loopback address, and requests a proxy forwarded. It
	// requires BearerToken: ListenHTTP and Handler refuse it without one,
	// as anyone on the network could run the tools otherwise (a Host
	// header is what a client claims, not where it is).
	//
	// Without it, only clients on a loopback address are served, and a
	// request carrying a proxy's Forwarded, X-Forwarded-For, -Host,
	// -Proto or -Port, X-Real-Ip or Via header is refused with 403: a
	// proxy on this machine connects from loopback, but its client is
	// elsewhere.
	AllowRemote bool
	// AllowedHosts are Host header names accepted besides the loopback
	// names (localhost, 127.0.0.1, [::1]; any port): a request naming any
	// other host is refused with 403, which defeats DNS rebinding. "*"
	// accepts any host.
	AllowedHosts []string
	// AllowedOrigins are Origin header values (scheme://host[:port])
	// accepted besides loopback origins; a request from any other origin
	// is refused with 403. Requests without Origin (not from a browser)
	// are accepted. "*" accepts any origin.
	AllowedOrigins []string
	// BearerToken, when set, must be sent as "Authorization: Bearer
	// <token>"; a request without it is refused with 401. AllowRemote
	// requires it.
	BearerToken string
	// JSONResponse answers requests with application/json instead of an
	// event stream (no progress notifications then).
	JSONResponse bool
}

// errRemoteWithoutToken refuses AllowRemote without a BearerToken.
var errRemoteWithoutToken = errors.New("mcp: AllowRemote requires a BearerToken: beyond loopback anyone on the network could run the tools otherwise")

// Handler returns an http.Handler serving the MCP streamable HTTP
// transport (any path), behind the client address, Host, Origin and
// bearer-token checks of opts. It fails when opts sets AllowRemote
// without a BearerToken, or names an empty host or origin.
func (s *Server) Handler(o *HTTPOptions) (http.Handler, error) {
	var opts HTTPOptions
	if o != nil {
		opts = *o
	}
	if opts.AllowRemote && opts.BearerToken == "" {
		return nil, errRemoteWithoutToken
	}
	opts.AllowedHosts, opts.AllowedOrigins = slices.Clone(opts.AllowedHosts), slices.Clone(opts.AllowedOrigins)
	for field, names := range map[string][]string{"AllowedHosts": opts.AllowedHosts, "AllowedOrigins": opts.AllowedOrigins} {
		if slices.ContainsFunc(names, func(n string) bool { return strings.TrimSpace(n) == "" }) {
			// It would match a request without Host (HTTP/1.0) or Origin.
			return nil, fmt.Errorf("mcp: an empty name in HTTPOptions.%s %q", field, names)
		}
	}
	// The guard checks Host itself, against AllowedHosts too; the SDK's
	// own check would refuse an allowed name on a loopback listener.
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.sdk },
		&sdk.StreamableHTTPOptions{JSONResponse: opts.JSONResponse, DisableLocalhostProtection: true})
	return guard(opts, h), nil
}

// guard checks the client's address (unless AllowRemote), Host, Origin
// and the bearer token before next runs.
func guard(opts HTTPOptions, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !opts.AllowRemote {
			if err := loopback.CheckClient(r); err != nil {
				http.Error(w, "Forbidden: "+err.Error()+" (the server can allow it: HTTPOptions.AllowRemote, with a BearerToken)", http.StatusForbidden)
				return
			}
		}
		if !hostAllowed(r.Host, opts.AllowedHosts) {
			http.Error(w, fmt.Sprintf("Forbidden: Host %q is not allowed", r.Host), http.StatusForbidden)
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" && !originAllowed(origin, opts.AllowedOrigins) {
			http.Error(w, fmt.Sprintf("Forbidden: Origin %q is not allowed", origin), http.StatusForbidden)
			return
		}
		if opts.BearerToken != "" {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(opts.BearerToken)) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="polyweave-mcp"`)
				http.Error(w, "Unauthorized: a valid bearer token is needed", http.StatusUnauthorized)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func hostName(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

func hostAllowed(host string, allowed []string) bool {
	if loopback.IsName(host) {
		return true
	}
	name := hostName(host)
	for _, a := range allowed {
		if a == "*" || strings.EqualFold(a, name) || strings.EqualFold(a, host) {
			return true
		}
	}
	return false
}

func originAllowed(origin string, allowed []string) bool {
	for _, a := range allowed {
		if a == "*" || strings.EqualFold(strings.TrimSuffix(a, "/"), origin) {
			return true
		}
	}
	u, err := url.Parse(origin)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && loopback.IsName(u.Hostname())
}

// HTTPServer is a running streamable HTTP endpoint from
// [Server.ListenHTTP].
type HTTPServer struct {
	srv  *http.Server
	url  string
	done chan error
}

// URL is the endpoint's URL (http://ADDR/mcp).
func (h *HTTPServer) URL() string { return h.url }

// Close stops accepting requests and waits for those in progress, or
// until ctx ends (then it closes them).
func (h *HTTPServer) Close(ctx context.Context) error {
	err := h.srv.Shutdown(ctx)
	if err != nil {
		_ = h.srv.Close()
	}
	if serr := <-h.done; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// ListenHTTP binds opts.Addr and serves the MCP endpoint at /mcp on it in
// the background until Close. An address beyond loopback is refused with
// [ErrNotLoopback] unless opts.AllowRemote, and AllowRemote without a
// BearerToken is refused before anything listens.
func (s *Server) ListenHTTP(o *HTTPOptions) (*HTTPServer, error) {
	var opts HTTPOptions
	if o != nil {
		opts = *o
	}
	if opts.Addr == "" {
		opts.Addr = DefaultHTTPAddr
	}
	handler, err := s.Handler(&opts) // refuses AllowRemote without a token
	if err != nil {
		return nil, err
	}
	addr := opts.Addr
	if !opts.AllowRemote {
		checked, err := loopback.ListenAddress(addr, ErrNotLoopback)
		if errors.Is(err, ErrNotLoopback) {
			return nil, fmt.Errorf("mcp: %w (set AllowRemote, and a BearerToken, to serve beyond this machine)", err)
		}
		if err != nil {
			return nil, fmt.Errorf("mcp: %w", err)
		}
		addr = checked
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("mcp: listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", handler)
	h := &HTTPServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		url: "http://" + ln.Addr().String() + "/mcp", done: make(chan error, 1)}
	go func() { h.done <- h.srv.Serve(ln) }()
	return h, nil
}
