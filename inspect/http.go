package inspect

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/polyweave/polyweave-go/internal/loopback"
)

//go:embed assets
var assets embed.FS

var (
	pageTemplate = template.Must(template.New("page.html").Funcs(template.FuncMap{
		"indent": func(depth int) string { return strconv.Itoa(depth * 14) },
		"clock":  func(t time.Time) string { return t.Format("15:04:05.000") },
		"dur":    shortDuration,
		"since":  func(t time.Time) string { return shortDuration(time.Since(t)) },
	}).ParseFS(assets, "assets/page.html"))
	staticFiles, _ = fs.Sub(assets, "assets/static")
)

// heartbeat is how often an idle event stream gets a comment line, and
// stale how often it gets a snapshot anyway (ages move on).
const (
	heartbeat = 15 * time.Second
	stale     = time.Second
)

// view is what the page template renders.
type view struct {
	Snapshot
	Selected string
	// Ambiguous are the keys of the sessions the bare session id Asked
	// could mean, when several agents' sessions have it (none selected).
	Asked     string
	Ambiguous []string
	Refresh   int // seconds, for the page without JavaScript
}

// ServeHTTP implements http.Handler (see the package doc for the
// endpoints). Mount it at the root of a path (http.StripPrefix for a
// prefix): the page's links are relative.
func (in *Inspector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// No framing by pages of other origins: under a decoy, the fault
	// buttons of a framed page could be clicked unawares, and its posts
	// are its own origin's (sameOrigin lets them through). Added to what
	// the host's middleware set: browsers enforce every policy given.
	if w.Header().Get("X-Frame-Options") == "" {
		w.Header().Set("X-Frame-Options", "SAMEORIGIN")
	}
	w.Header().Add("Content-Security-Policy", "frame-ancestors 'self'")
	if err := in.allowed(r); err != nil {
		http.Error(w, "inspect: "+err.Error(), http.StatusForbidden)
		return
	}
	switch path := r.URL.Path; {
	case path == "/" || path == "":
		in.servePage(w, r)
	case path == "/api/state":
		in.serveState(w, r)
	case path == "/api/events":
		in.serveEvents(w, r)
	case strings.HasPrefix(path, "/api/fault/") && in.opts.Faults:
		in.serveFault(w, r, strings.TrimPrefix(path, "/api/fault/"))
	case strings.HasPrefix(path, "/static/"):
		w.Header().Set("Cache-Control", "no-cache")
		http.StripPrefix("/static", http.FileServerFS(staticFiles)).ServeHTTP(w, r)
	default:
		http.NotFound(w, r)
	}
}

// allowed refuses clients and Host names that are not loopback, unless
// Options.AllowRemote: a client not on a loopback address, or one a proxy
// forwarded (see loopback.CheckClient), and a Host that is not a loopback
// name (DNS rebinding).
func (in *Inspector) allowed(r *http.Request) error {
	if in.opts.AllowRemote {
		return nil
	}
	if err := loopback.CheckClient(r); err != nil {
		return fmt.Errorf("%w (the host can allow it: Options.AllowRemote)", err)
	}
	if !loopback.IsName(r.Host) {
		return fmt.Errorf("host %q is not a loopback name (the host can allow it: Options.AllowRemote)", r.Host)
	}
	return nil
}

func (in *Inspector) view(r *http.Request) view {
	sel := r.URL.Query().Get("session")
	snap, ambiguous := in.snapshot(sel)
	v := view{Snapshot: snap, Selected: sel, Refresh: max(1, int(in.opts.Refresh.Round(time.Second)/time.Second))}
	if snap.Session == nil {
		v.Selected = ""
	}
	if len(ambiguous) > 0 {
		v.Asked, v.Ambiguous = sel, ambiguous
	}
	return v
}

func (in *Inspector) servePage(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	var b bytes.Buffer
	v := in.view(r)
	if err := pageTemplate.Execute(&b, v); err != nil {
		http.Error(w, "inspect: render: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if len(v.Ambiguous) > 0 {
		// As /api/state: the page names the sessions the id could mean.
		w.WriteHeader(http.StatusConflict)
	}
	_, _ = w.Write(b.Bytes())
}

func (in *Inspector) serveState(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	sel := r.URL.Query().Get("session")
	snap, ambiguous := in.snapshot(sel)
	if len(ambiguous) > 0 {
		// Several agents' sessions have the id: say which, rather than
		// answer with none selected.
		w.WriteHeader(http.StatusConflict)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"error":    fmt.Sprintf("inspect: session %q is ambiguous: %d agents' sessions have that id; select one by its key", sel, len(ambiguous)),
			"sessions": ambiguous,
		})
		return
	}
	_ = json.NewEncoder(w).Encode(snap)
}

// fragments are the parts of the page the script replaces, rendered by
// the page's own templates.
var fragments = []string{"status", "tree", "sessions", "session", "feed", "tools"}

// event renders one event: the snapshot as JSON, or with view=html the
// page's fragments (a JSON object of HTML strings by element id).
func (in *Inspector) event(r *http.Request, html bool) (name string, data []byte, err error) {
	if !html {
		data, err = json.Marshal(in.Snapshot(r.URL.Query().Get("session")))
		return "snapshot", data, err
	}
	v := in.view(r)
	parts := make(map[string]string, len(fragments))
	var b bytes.Buffer
	for _, f := range fragments {
		b.Reset()
		if err := pageTemplate.ExecuteTemplate(&b, f, v); err != nil {
			return "", nil, err
		}
		parts[f] = b.String()
	}
	data, err = json.Marshal(parts)
	return "view", data, err
}

// serveEvents follows the inspector for one client. It coalesces: the
// hooks on the hot path only bump in.version (no channel, no goroutine
// woken per change; once for the records a fold shows, see logged); the stream looks at it at the ticks of the
// inspector's clock (every coarseResolution: no timer of its own, see
// coarseClock) and, Options.Interval after its last event (250ms by
// default: the page still feels live), sends what accumulated as one
// event, one write and one flush; a stream with nothing new sends a
// snapshot once it is stale (ages move on; never sooner than
// Options.Interval) and a comment line now and then.
func (in *Inspector) serveEvents(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	html := r.URL.Query().Get("view") == "html"
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	send := func() error {
		name, data, err := in.event(r, html)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data); err != nil {
			return err
		}
		return rc.Flush()
	}
	// A write blocked on a client that stopped reading is not ended by
	// the checks of in.closed between writes: Close makes it fail, with a
	// write deadline in the past (the connection is not reused: its last
	// write fails). Once set, it is set before the handler returns.
	deadlineSet := make(chan struct{})
	stopDeadline := context.AfterFunc(in.closing, func() {
		defer close(deadlineSet)
		_ = rc.SetWriteDeadline(time.Unix(1, 0))
	})
	defer func() {
		if !stopDeadline() {
			<-deadlineSet
		}
	}()
	if _, err := fmt.Fprint(w, "retry: 1000\n\n"); err != nil {
		return
	}
	last := in.version.Load()
	if send() != nil {
		return
	}
	sent, beat := time.Now(), time.Now()
	wait, refresh := ticksLater(in.opts.Interval), ticksLater(max(stale, in.opts.Interval))
	ticks, unsubscribe := in.clock.subscribe()
	defer unsubscribe()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-in.closed:
			return
		case <-ticks:
			now, v := time.Now(), in.version.Load()
			if since := now.Sub(sent); since >= wait && (v != last || since >= refresh) {
				last, sent, beat = v, now, now
				if send() != nil {
					return
				}
			} else if now.Sub(beat) >= heartbeat {
				beat = now
				if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
					return
				}
			}
		}
	}
}

// ticksLater is how long after its last event a stream sends the next
// one d later, at a tick of the inspector's clock: d rounded up to a
// whole number of ticks, less half a tick. The stream's times are read
// when it handles a tick, a little after the tick, and by a little more
// or less each time: without the half tick of slack, an event stamped
// late would make the one d later a tick late.
// An interval too long to count in ticks (hundreds of years) is never.
func ticksLater(d time.Duration) time.Duration {
	n := d / coarseResolution
	if d%coarseResolution != 0 {
		n++ // rounded up without d+resolution-1, which overflows near the maximum
	}
	if n > math.MaxInt64/coarseResolution {
		return math.MaxInt64
	}
	return max(1, n)*coarseResolution - coarseResolution/2
}

// serveFault runs one fault injection.
func (in *Inspector) serveFault(w http.ResponseWriter, r *http.Request, what string) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "method not allowed: fault injection is a POST", http.StatusMethodNotAllowed)
		return
	}
	if err := sameOrigin(r, in.opts.AllowRemote); err != nil {
		http.Error(w, "inspect: "+err.Error(), http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFaultForm)
	if err := r.ParseForm(); err != nil {
		if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
			http.Error(w, fmt.Sprintf("inspect: a fault form is %d bytes at most", maxFaultForm), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "inspect: "+err.Error(), http.StatusBadRequest)
		return
	}
	var text string
	var err error
	switch what {
	case "panic":
		text, err = in.InjectPanic(r.PostForm.Get("actor"))
	case "stall":
		on, perr := strconv.ParseBool(r.PostForm.Get("on"))
		if perr != nil {
			err = fmt.Errorf("%w: on=%q: want true or false", errBadFault, r.PostForm.Get("on"))
			break
		}
		text, err = in.Stall(r.PostForm.Get("tool"), on)
	case "cut":
		text, err = in.CutStream(r.PostForm.Get("stream"))
	default:
		http.NotFound(w, r)
		return
	}
	status := http.StatusOK
	if err != nil {
		status, text = http.StatusNotFound, err.Error()
		switch {
		case errors.Is(err, errBadFault):
			status = http.StatusBadRequest
		case errors.Is(err, ErrClosed):
			status = http.StatusServiceUnavailable
		}
	}
	if !strings.Contains(r.Header.Get("Accept"), "application/json") {
		// A form posted without JavaScript: back to the page.
		back := "../../"
		if s := r.PostForm.Get("session"); s != "" {
			back += "?session=" + url.QueryEscape(s)
		}
		if err != nil {
			http.Error(w, "inspect: "+text, status)
			return
		}
		// Relative, so that it holds under any mount point.
		w.Header().Set("Location", back)
		w.WriteHeader(http.StatusSeeOther)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": err == nil, "text": text})
}

// maxFaultForm bounds a fault form's body: an actor's id, a tool's name
// or a stream's id, and the session shown.
const maxFaultForm = 8 << 10

// sameOrigin refuses fault posts that do not come from the inspector's
// own page: a post another site open in the browser makes it send
// (Sec-Fetch-Site other than same-origin, or an Origin other than the
// inspector's, its scheme, host and port compared), and a post saying
// neither, which only an old browser (which any page could make post)
// or a client without a browser sends: such a client says Origin, the
// inspector's own. With trustProto (Options.AllowRemote: proxies
// allowed), the scheme is a proxy's X-Forwarded-Proto when it sets
// one (a proxy ending TLS before the inspector), which no page can
// make a browser send without the inspector's consent (CORS).
func sameOrigin(r *http.Request, trustProto bool) error {
	site := r.Header.Get("Sec-Fetch-Site")
	switch site {
	case "", "same-origin", "none":
	default:
		return fmt.Errorf("fault posts must come from the inspector's own page (Sec-Fetch-Site: %s)", site)
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		if site == "" {
			return fmt.Errorf("fault posts must say where they come from: a browser sends Origin or Sec-Fetch-Site, another client must send Origin: %s://%s", requestScheme(r, trustProto), clip(r.Host, DefaultClip))
		}
		return nil
	}
	scheme := requestScheme(r, trustProto)
	if u, err := url.Parse(origin); err != nil || u.Scheme != scheme || canonicalHost(u.Host, scheme) != canonicalHost(r.Host, scheme) {
		return fmt.Errorf("fault posts must come from the inspector's own page (Origin %s)", clip(origin, DefaultClip))
	}
	return nil
}

// requestScheme is the scheme of the origin r was sent to (see
// sameOrigin). Proxies in a chain may each add theirs to
// X-Forwarded-Proto ("https, http"): the first is the one the client
// asked for.
func requestScheme(r *http.Request, trustProto bool) string {
	if trustProto {
		proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
		if proto = strings.ToLower(strings.TrimSpace(proto)); proto == "http" || proto == "https" {
			return proto
		}
	}
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// canonicalHost is host (a Host header or an Origin's host) in lower
// case with its port, the scheme's default one when it has none, and
// an IPv6 zone unescaped: a Host header writes it as a URL does
// ("[fe80::1%25eth0]"), url.Parse gives an Origin's unescaped.
func canonicalHost(host, scheme string) string {
	host = strings.Replace(host, "%25", "%", 1)
	if _, _, err := net.SplitHostPort(host); err != nil {
		switch scheme {
		case "http":
			host = net.JoinHostPort(strings.Trim(host, "[]"), "80")
		case "https":
			host = net.JoinHostPort(strings.Trim(host, "[]"), "443")
		}
	}
	return strings.ToLower(host)
}

// Listen listens on addr (host:port) for the inspector. It refuses an
// address that is not a loopback one (an empty host listens on every
// interface; a name is loopback when all its addresses are, and is
// listened on at the loopback IP it resolved to) unless
// ListenOptions.AllowRemote. Port 0 picks a free port: see the listener's
// Addr.
func Listen(addr string, o *ListenOptions) (net.Listener, error) {
	var opts ListenOptions
	if o != nil {
		opts = *o
	}
	if !opts.AllowRemote {
		checked, err := loopback.ListenAddress(addr, ErrNotLoopback)
		if err != nil {
			return nil, fmt.Errorf("inspect: %w", err)
		}
		addr = checked
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	return ln, nil
}

// ListenOptions configure [Listen].
type ListenOptions struct {
	// AllowRemote listens on addresses other than loopback ones too.
	AllowRemote bool
}

// ErrNotLoopback is returned (wrapped) by [Listen] for an address other
// than a loopback one.
var ErrNotLoopback = errors.New("not a loopback address: the inspector shows conversations and can inject faults, so it listens on 127.0.0.1, [::1] or localhost unless remote access is asked for")
