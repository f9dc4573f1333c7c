package mcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/internal/origin"
	"github.com/polyweave/polyweave-go/internal/urlredact"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
	"github.com/polyweave/polyweave-go/tools"
)

// Defaults of [ImportOptions].
const (
	DefaultConnectTimeout = 30 * time.Second
	DefaultInitialBackoff = 100 * time.Millisecond
	DefaultMaxBackoff     = 5 * time.Second
	// DefaultKeepAlive and DefaultKeepAliveMisses find a server that
	// stopped answering within about a minute and a half: three pings,
	// 30s apart, each not answered within 15s.
	DefaultKeepAlive       = 30 * time.Second
	DefaultKeepAliveMisses = 3
)

// ImportOptions say which MCP server to import tools from and how. Exactly
// one of Command and URL is needed. Options are copied by [Import].
type ImportOptions struct {
	// Command runs a local MCP server over stdio: the program and its
	// arguments. Env adds variables to the environment it inherits; Dir is
	// its working folder (default: the current one).
	Command []string
	Env     []string
	Dir     string
	// Stderr receives the standard error of the Command's process (where
	// servers say why they fail); nil discards it.
	Stderr io.Writer
	// URL is the endpoint of a streamable HTTP MCP server. BearerToken,
	// when set, is sent as Authorization: Bearer on every request to the
	// URL's scheme, host and port. A redirect is followed only when it
	// keeps the method (307 and 308) and the URL's scheme, host and port:
	// a POST redirected with 301, 302 or 303, or to another origin, fails
	// (with an error that does not name where it pointed), and so does a
	// DELETE redirected at all (see Close). Errors and log lines name the
	// server by its URL with its user info (the user name may be a token
	// too: https://TOKEN@host/) and the values of the parameters of its
	// query and fragment (where a server may put a token) cut out, its
	// host and path kept, as they write every URL they quote (a
	// redirect's Location), and show neither these (those of 8 bytes or
	// more), nor the basic auth the HTTP client makes of the user info, nor the bearer
	// token, nor the user info of the proxy the requests go through,
	// where the SDK's errors or the answers of the server or proxy quote
	// them; a URL that does not parse is refused without being shown.
	URL         string
	BearerToken string
	// Prefix is put before each tool's name (for example "fs_"), so that
	// tools of different servers cannot clash. Characters a tool name may
	// not contain (anything but letters, digits, '_' and '-') become '_'.
	Prefix string
	// CallTimeout bounds one call (the tools' timeout): when it passes,
	// or the call is cancelled, the server is sent notifications/cancelled
	// and the call is answered with an error. Zero means
	// tools.DefaultTimeout; tools.NoTimeout disables it.
	CallTimeout time.Duration
	// ConnectTimeout bounds starting the server and reading its tool list;
	// default 30s.
	ConnectTimeout time.Duration
	// KeepAlive is how often the connection pings the server, to find a
	// server that stopped answering (a stuck process, a connection that
	// went quiet): when KeepAliveMisses pings in a row are not answered,
	// each within half of KeepAlive, the session is ended, the calls in
	// flight are answered with errors naming the server, and the server is
	// connected to (or started) again. Zero means DefaultKeepAlive; a
	// negative value sends no pings. A server that cannot answer a ping
	// while it runs a call (one serving one request at a time) needs a
	// KeepAlive × KeepAliveMisses longer than its longest call, or none.
	// A server that answers ping with "method not found" is not pinged
	// further.
	KeepAlive time.Duration
	// KeepAliveMisses is how many pings in a row may go unanswered before
	// the server is taken for gone; zero means DefaultKeepAliveMisses.
	KeepAliveMisses int
	// Supervision supervises the connection actor; nil means: restart up
	// to 10 times a minute with a back-off from 100ms doubling to 5s,
	// after which the server is given up and its tools answer errors.
	Supervision *supervisor.Strategy
	// Logger receives the connection's log; nil discards it.
	Logger *slog.Logger
	// OnToolsChanged, when set, is called with the server's tools each
	// time they change after Import returned: the server sent
	// notifications/tools/list_changed, or a restarted server offers
	// different tools. Calls come one at a time from a goroutine of the
	// import, each with the latest list ([Imported.Tools]). A router, loop
	// or agent keeps the tools it started with, so this is where a host
	// starts its next one with the new list. It must not call Close.
	OnToolsChanged func([]*tools.Tool)

	hooks *hooks // the package's tests' (export_test.go)
}

// hooks hold an import at the points where its races happen, so that
// the package's tests can make them happen in one order, and give it
// what the tests cannot through the environment (a proxy).
type hooks struct {
	// connected is called by a connection attempt that has its session
	// and has not yet made it known to the teardown.
	connected func()
	// teardownWaits is called when the teardown begins to wait for the
	// connection attempts in flight.
	teardownWaits func()
	// proxy, when set, is the proxy of every request.
	proxy *url.URL
}

// Imported is a connection to one MCP server and the tools it offers. Its
// tools are ordinary tools: give them to a router, a loop or an agent.
// The connection is a supervised actor on the runtime: when the server
// process dies or the connection drops, the calls in flight are answered
// with error results, the actor fails and is restarted with back-off, the
// server is started (or reconnected) again and its tool list re-read.
// Calls made meanwhile wait for the connection, within their timeout. An
// Imported is safe for concurrent use.
type Imported struct {
	opts ImportOptions
	name string // the server's, in errors and logs (what)
	// scrub cuts the credentials of the URL, of its proxy and the bearer
	// token out of an error's text (redact).
	scrub *strings.Replacer
	link  *link
	conn  *actors.Conn
	http  *http.Transport // for a URL: closed with the import
	// endpoint is the URL parsed, or nil for a command.
	endpoint *url.URL

	mu     sync.Mutex
	tools  []*tools.Tool
	byName map[string]importedTool // by the server's name
	listed bool                    // the first list is in

	liveMu sync.Mutex
	live   map[*sdk.ClientSession]*sessionState // sessions opened and not yet closed
	// connects are the connection attempts in flight, which the teardown
	// waits for: an attempt that has its session but has not yet put it
	// in live would otherwise end it (its DELETE sent) after Close
	// returned. Once tornDown is set (under liveMu), no attempt begins.
	connects sync.WaitGroup
	tornDown bool

	// The server processes started while Import waits for the first
	// list, so that a failed Import kills them at once: a server that
	// does not answer would otherwise linger until the SDK's closing
	// grace (stdin closed, then SIGTERM) has passed.
	procMu   sync.Mutex
	procs    []*os.Process
	tracking bool           // Import is waiting: record started processes
	killed   bool           // Import failed: kill what starts from now on
	inflight sync.WaitGroup // connect calls started while tracking
	// abandoned ends when Import has failed: the connection attempt in
	// flight is cut short then, rather than at its ConnectTimeout.
	abandoned context.Context
	abandon   context.CancelFunc

	changed   chan struct{} // a change to report (buffered: the latest counts)
	quit      chan struct{} // closed by the teardown: the notifier ends
	closeOnce sync.Once     // starts the teardown
	closed    chan struct{} // closed when the teardown has ended
	closeErr  error         // the teardown's, read once closed is
	done      chan struct{} // closed when the notifier has ended

	// givenUp ends when a Close's context ended before the teardown did:
	// the DELETE that ends an HTTP session is given up then (sessionEnd),
	// which endErr records for the teardown's error, and a stdio server
	// is killed (trackedTransport).
	givenUp context.Context
	giveUp  context.CancelCauseFunc

	// closing ends (with errImportClosed) when the teardown starts: a
	// call in flight is cut short then and answered with that error,
	// rather than held, and the teardown with it, until its timeout.
	closing  context.Context
	shutting context.CancelCauseFunc
	endMu    sync.Mutex
	endErr   error
}

// importedTool is a server's tool as imported, with what it was made
// from, so that an unchanged tool keeps its *tools.Tool across lists.
type importedTool struct {
	tool *tools.Tool
	from []byte // the server's tool, as JSON
}

// Import starts the connection actor on rt, waits for the server's tool
// list (within ctx and ConnectTimeout) and makes a tool of each of the
// server's tools, named Prefix + its name, with its description, its input
// schema (arguments are validated against it before a call is sent) and
// flags from its annotations (read-only → capability "read", declared,
// so the tool is read-only here; otherwise "write"; destructive, or no
// destructive hint → irreversible; idempotent). A tool's result is the server's
// structuredContent when it sends one, and otherwise its text content as
// a JSON string; a result with isError, or a call that fails on the way,
// is an error result (of the structuredContent when it is an object, so
// that a refusal keeps its shape).
//
// When the first connection fails (the command cannot start, the server
// does not answer initialize or tools/list), Import returns its error:
// restarts are for a server that was running. When ctx ends first, the
// connection attempt is cut short and Import returns at once, without
// sending the DELETE that would end an HTTP session the attempt opened
// (the server keeps it until it expires it); what the import started has
// ended by then.
//
// The tool list is read again when the server sends
// notifications/tools/list_changed and after every restart:
// [Imported.Tools] is always the latest list, ImportOptions.OnToolsChanged
// hears of each change, and a tool the server no longer offers answers an
// error. Close stops the connection.
func Import(ctx context.Context, rt *actors.Runtime, o *ImportOptions) (*Imported, error) {
	if rt == nil {
		return nil, errors.New("mcp: import: nil runtime")
	}
	var opts ImportOptions
	if o != nil {
		opts = *o
	}
	opts.Command, opts.Env = slices.Clone(opts.Command), slices.Clone(opts.Env)
	switch {
	case len(opts.Command) == 0 && opts.URL == "":
		return nil, errors.New("mcp: import: a Command or a URL is needed")
	case len(opts.Command) > 0 && opts.URL != "":
		return nil, errors.New("mcp: import: give a Command or a URL, not both")
	case len(opts.Command) > 0 && opts.Command[0] == "":
		return nil, errors.New("mcp: import: empty command")
	}
	name := strings.Join(opts.Command, " ")
	var endpoint *url.URL
	if opts.URL != "" {
		var err error
		endpoint, err = url.Parse(opts.URL)
		if err != nil {
			// Not the parser's error, which quotes the URL, or a piece of
			// it (a port that is the password of a user info whose "/"
			// ended the host).
			return nil, errors.New("mcp: import: the URL does not parse (it is not shown, as it may hold credentials)")
		}
		name = urlredact.URL(endpoint)
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = DefaultConnectTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	switch {
	case opts.KeepAlive == 0:
		opts.KeepAlive = DefaultKeepAlive
	case opts.KeepAlive < 0:
		opts.KeepAlive = 0 // go-sdk: no pings
	}
	if opts.KeepAliveMisses <= 0 {
		opts.KeepAliveMisses = DefaultKeepAliveMisses
	}
	if opts.Supervision == nil {
		var err error
		opts.Supervision, err = supervisor.New(&supervisor.Options{MaxRestarts: 10, Within: time.Minute,
			InitialBackoff: DefaultInitialBackoff, MaxBackoff: DefaultMaxBackoff, Logger: opts.Logger})
		if err != nil {
			return nil, err
		}
	}
	im := &Imported{opts: opts, name: name, scrub: strings.NewReplacer(), link: newLink(), byName: map[string]importedTool{}, live: map[*sdk.ClientSession]*sessionState{},
		changed: make(chan struct{}, 1), quit: make(chan struct{}), closed: make(chan struct{}), done: make(chan struct{}), tracking: true}
	im.givenUp, im.giveUp = context.WithCancelCause(context.Background())
	im.abandoned, im.abandon = context.WithCancel(context.Background())
	im.closing, im.shutting = context.WithCancelCause(context.Background())
	if opts.OnToolsChanged != nil {
		go im.notifier()
	} else {
		close(im.done)
	}
	if opts.URL != "" {
		im.http = http.DefaultTransport.(*http.Transport).Clone()
		if h := opts.hooks; h != nil && h.proxy != nil {
			im.http.Proxy = http.ProxyURL(h.proxy)
		}
		im.endpoint = endpoint
		im.scrub = urlScrubber(endpoint, opts.BearerToken, im.http.Proxy)
	}
	child := actors.Spec{New: func() actors.Logic { return &connection{im: im} }}
	parent := actors.Spec{Supervision: opts.Supervision, New: func() actors.Logic { return &connectionSupervisor{im: im, child: child} }}
	conn, err := rt.Start(parent)
	if err != nil {
		return nil, fmt.Errorf("mcp: import %s: %w", im.what(), err)
	}
	im.conn = conn
	wctx, cancel := context.WithTimeout(ctx, opts.ConnectTimeout)
	defer cancel()
	if err := im.link.firstList(wctx); err != nil {
		if ctx.Err() != nil {
			// Nothing is waited for past ctx: the DELETE of a session the
			// attempt in flight opened is given up, as by a Close whose
			// context ended, before it is sent.
			im.giveUp(fmt.Errorf("the context of Import ended: %w", ctx.Err()))
		}
		im.killStarted()
		_ = im.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("mcp: import %s: %w", im.what(), err)
	}
	im.procMu.Lock()
	im.tracking, im.procs = false, nil
	im.procMu.Unlock()
	return im, nil
}

// killStarted kills the server processes a failing Import started (and
// any that start from now on), cuts the connection attempts in flight
// short (a server that holds its tools/list, over HTTP, would otherwise
// hold them until their ConnectTimeout), and waits until they have
// ended, which reaps the processes.
func (im *Imported) killStarted() {
	im.procMu.Lock()
	im.killed = true
	for _, p := range im.procs {
		_ = p.Kill()
	}
	im.procs = nil
	im.procMu.Unlock()
	im.abandon()
	im.inflight.Wait()
}

// started records a server process started while Import waits, or kills
// it when Import has already failed.
func (im *Imported) started(p *os.Process) {
	im.procMu.Lock()
	defer im.procMu.Unlock()
	switch {
	case im.killed:
		_ = p.Kill()
	case im.tracking:
		im.procs = append(im.procs, p)
	}
}

// trackedTransport tells the import of the process its command starts.
type trackedTransport struct {
	im  *Imported
	cmd *exec.Cmd
	sdk.Transport
}

func (t trackedTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return c, err
	}
	p := t.cmd.Process // set by Start, in this goroutine
	t.im.started(p)
	// Once a Close has given up waiting, the server is killed at once
	// rather than after the SDK's closing grace (stdin closed, then
	// SIGTERM): the caller may be about to exit, leaving a server that
	// ignores both running.
	stop := context.AfterFunc(t.im.givenUp, func() { _ = p.Kill() })
	return killableConn{Connection: c, stop: stop}, nil
}

// killableConn is the connection of a server process that a Close which
// gave up kills: closing it (once the SDK has reaped the process) ends
// that watch.
type killableConn struct {
	sdk.Connection
	stop func() bool
}

func (c killableConn) Close() error {
	err := c.Connection.Close()
	c.stop()
	return err
}

// refresh makes the tools of list (read from session s) the import's
// tools, unless s is no longer the current session. A change after the
// first list is reported to OnToolsChanged.
func (im *Imported) refresh(s *sdk.ClientSession, list []*sdk.Tool) {
	if !im.link.current(s) {
		return
	}
	im.mu.Lock()
	defer im.mu.Unlock()
	next := make([]*tools.Tool, 0, len(list))
	byName := map[string]importedTool{}
	taken := map[string]bool{}
	for _, rt := range list {
		from, err := json.Marshal(rt)
		if err != nil {
			im.opts.Logger.Warn("MCP tool not imported", "server", im.what(), "tool", rt.Name, "err", err)
			continue
		}
		it, ok := im.byName[rt.Name]
		if !ok || !bytes.Equal(it.from, from) {
			t, err := im.tool(rt)
			if err != nil {
				im.opts.Logger.Warn("MCP tool not imported", "server", im.what(), "tool", rt.Name, "err", err)
				continue
			}
			it = importedTool{tool: t, from: from}
		}
		if taken[it.tool.Name()] {
			im.opts.Logger.Warn("MCP tool not imported", "server", im.what(), "tool", rt.Name,
				"err", fmt.Sprintf("name %q taken by another tool of the server", it.tool.Name()))
			continue
		}
		taken[it.tool.Name()] = true
		byName[rt.Name] = it
		next = append(next, it.tool)
	}
	changed := !slices.Equal(next, im.tools)
	im.tools, im.byName = next, byName
	if im.listed && changed {
		select {
		case im.changed <- struct{}{}:
		default: // a report is pending: it will carry this list
		}
	}
	im.listed = true
}

// notifier calls OnToolsChanged, one call at a time, until Close.
func (im *Imported) notifier() {
	defer close(im.done)
	for {
		select {
		case <-im.changed:
			select {
			case <-im.quit:
				return
			default:
			}
			im.opts.OnToolsChanged(im.Tools())
		case <-im.quit:
			return
		}
	}
}

// what names the server in errors and logs: its command, or its URL
// with the credentials it may hold cut out (urlredact.URL).
func (im *Imported) what() string { return im.name }

// minCredential is the length from which a credential of the URL (the
// password, a query value) or the bearer token is cut out wherever it
// stands in an error's text: a shorter one would cut words, and is cut
// out of the URL alone.
const minCredential = 8

// urlScrubber returns the replacer that cuts the credentials of u, and
// token, out of an error's text: u's query string, as http.Client's
// errors quote the URL (the password already cut out), and u's user
// info past the URL's "//" (as written, as http.Client writes it, its
// password cut out, and as url.URL.Redacted does), then the user name (which may be a token:
// https://TOKEN@host/), the password and the basic auth the HTTP client
// makes of them, each value of the query (as written, and unescaped) and
// token on their own, where the server quoted them, and the user info
// of the URL of u's proxy (per proxy, when not nil): the user name, the
// password, and the basic auth the transport sends the proxy in the
// CONNECT of an https URL, where a proxy refusing it may quote it (its
// reason is then the transport's error).
func urlScrubber(u *url.URL, token string, proxy func(*http.Request) (*url.URL, error)) *strings.Replacer {
	var pairs []string
	if u.RawQuery != "" {
		pairs = append(pairs, "?"+u.RawQuery, "?"+urlredact.Params(u.RawQuery))
	}
	if u.User != nil {
		// After the "//" of the URL: a short user name ("me") ends words
		// too ("home@host").
		shown := "//" + urlredact.User(u.User).String() + "@"
		pairs = append(pairs, "//"+u.User.String()+"@", shown)
		if _, ok := u.User.Password(); ok {
			name := "//" + url.User(u.User.Username()).String()
			pairs = append(pairs, name+":***@", shown, name+":xxxxx@", shown)
		}
	}
	secrets := append([]string{token}, userSecrets(u.User)...)
	for pair := range strings.SplitSeq(u.RawQuery, "&") {
		_, value, _ := strings.Cut(pair, "=")
		secrets = append(secrets, value)
		if v, err := url.QueryUnescape(value); err == nil {
			secrets = append(secrets, v)
		}
	}
	if proxy != nil {
		if p, err := proxy(&http.Request{URL: u, Header: http.Header{}}); err == nil && p != nil {
			secrets = append(secrets, userSecrets(p.User)...)
		}
	}
	for _, s := range secrets {
		if len(s) >= minCredential {
			pairs = append(pairs, s, urlredact.Mark)
		}
	}
	return strings.NewReplacer(pairs...)
}

// userSecrets returns the credentials of the user info u (none when
// nil), which the HTTP client sends as basic auth, password or not: the
// user name, the password, and the base64 of that basic auth.
func userSecrets(u *url.Userinfo) []string {
	if u == nil {
		return nil
	}
	password, _ := u.Password()
	return []string{u.Username(), password, base64.StdEncoding.EncodeToString([]byte(u.Username() + ":" + password))}
}

// redact returns err with the credentials of the import's URL and its
// bearer token cut out of its text (err itself is kept for errors.Is
// and errors.As), and the user info and the values of the query and
// fragment of every URL in it (urlredact.Text): go-sdk's errors quote
// the URL of a request that failed as http.Client does, query string and
// fragment included, and after a redirect that is the redirect's
// Location, which the server writes as it likes.
func (im *Imported) redact(err error) error {
	if err == nil {
		return nil
	}
	if text := urlredact.Text(im.scrub.Replace(err.Error())); text != err.Error() {
		return &redactedError{err: err, text: text}
	}
	return err
}

// redactedError is an error whose text has credentials cut out.
type redactedError struct {
	err  error
	text string
}

func (e *redactedError) Error() string { return e.text }
func (e *redactedError) Unwrap() error { return e.err }

// Tools are the server's tools as last listed, in the server's order. A
// tool the server did not change between two lists is the same
// *tools.Tool in both.
func (im *Imported) Tools() []*tools.Tool {
	im.mu.Lock()
	defer im.mu.Unlock()
	return slices.Clone(im.tools)
}

// Connections counts the connections made so far (1 + restarts).
func (im *Imported) Connections() int { return im.link.connections() }

// Close stops the connection actor (closing the session, which ends a
// stdio server) and waits until it is gone or ctx ends. Calls still
// waiting are answered with errors, and so are calls in flight, cut
// short (the server may have run them). The DELETE that ends an HTTP
// session is bounded (sessionEndTimeout): when the server does not
// answer it in time, or it fails, Close's error says the server was not
// told the session ended; when the server answers it with an error
// status, that the server did not end the session, with the status (but
// for 405 Method Not Allowed, the answer of a server that does not let
// clients end sessions, and 404 Not Found, that of one that ended it
// already). When ctx ends first, Close returns its error
// and the teardown goes on without it, giving up that DELETE if the
// server has not answered it yet (the teardown's error then says so),
// and killing a stdio server at once rather than after the closing grace
// (stdin closed, then SIGTERM) it gives a server that does not exit. Close may be called
// again, to wait for the teardown and have its error.
func (im *Imported) Close(ctx context.Context) error {
	im.closeOnce.Do(func() {
		im.shutting(errImportClosed) // at once: what fails from now on is the teardown's
		go im.teardown()
	})
	select {
	case <-im.closed:
	case <-ctx.Done():
		im.giveUp(fmt.Errorf("the context of Close ended: %w", ctx.Err()))
		return fmt.Errorf("mcp: close import %s: %w", im.what(), ctx.Err())
	}
	select {
	case <-im.done:
	case <-ctx.Done():
		return errors.Join(im.closeErr, fmt.Errorf("mcp: close import %s: the OnToolsChanged callback has not returned: %w", im.what(), ctx.Err()))
	}
	return im.closeErr
}

// teardown is Close's work, done once, whoever waits for it.
func (im *Imported) teardown() {
	defer close(im.closed)
	im.link.shut(errImportClosed)
	im.shutting(errImportClosed)
	im.liveMu.Lock()
	im.tornDown = true
	im.liveMu.Unlock()
	im.closeErr = im.conn.Close(context.Background()) // bounded: the actor ends once its session has closed
	// The connection attempts in flight end soon: their incarnation has
	// ended, and their context with it. Each has put its session in live,
	// or ended it, by then.
	if h := im.opts.hooks; h != nil && h.teardownWaits != nil {
		h.teardownWaits()
	}
	im.connects.Wait()
	// A session whose incarnation ended before it heard of it (or whose
	// watch is still closing it) is closed here, so that no server
	// process or connection outlives the import.
	im.liveMu.Lock()
	orphans := make([]*sdk.ClientSession, 0, len(im.live))
	for s := range im.live {
		orphans = append(orphans, s)
	}
	im.liveMu.Unlock()
	for _, s := range orphans {
		im.ended(s)
	}
	// A DELETE that a watch still runs for one of these sessions has
	// recorded its error by now: a session stays live until its Close has
	// returned, and go-sdk's Close of a session being closed waits for
	// that close (the DELETE included) to end.
	im.endMu.Lock()
	im.closeErr = errors.Join(im.closeErr, im.endErr)
	im.endMu.Unlock()
	if im.http != nil {
		im.http.CloseIdleConnections()
	}
	close(im.quit)
}

var errImportClosed = errors.New("the import was closed")

// errDropped ends a session that a call found broken.
var errDropped = errors.New("closed after a call found the connection broken")

// sanitize makes a valid tool name of prefix+name.
func sanitize(prefix, name string) string {
	b := []byte(prefix + name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}

func (im *Imported) tool(rt *sdk.Tool) (*tools.Tool, error) {
	name := sanitize(im.opts.Prefix, rt.Name)
	schema, err := json.Marshal(rt.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("encode input schema: %w", err)
	}
	def := tools.Definition{Name: name, Description: rt.Description, Schema: schema,
		Timeout: im.opts.CallTimeout, Capabilities: []string{"write"}}
	if def.Description == "" {
		def.Description = rt.Title
	}
	if a := rt.Annotations; a != nil {
		if a.ReadOnlyHint {
			def.Capabilities = []string{"read"}
		}
		def.Irreversible = a.DestructiveHint == nil || *a.DestructiveHint // MCP's default is destructive
		def.Idempotent = a.IdempotentHint
	} else {
		def.Irreversible = true
	}
	if rt.OutputSchema != nil {
		if def.OutputSchema, err = json.Marshal(rt.OutputSchema); err != nil {
			return nil, fmt.Errorf("encode output schema: %w", err)
		}
	}
	remoteName := rt.Name
	def.Handler = func(ctx context.Context, args json.RawMessage) (any, error) {
		return im.call(ctx, remoteName, args)
	}
	return tools.New(def)
}

// call sends one tools/call on the current session, waiting for a
// connection first when there is none.
func (im *Imported) call(ctx context.Context, name string, args json.RawMessage) (any, error) {
	sess, offered, err := im.link.wait(ctx)
	if err != nil {
		return nil, fmt.Errorf("MCP server %s unavailable: %w", im.what(), err)
	}
	if !offered[name] {
		return nil, fmt.Errorf("MCP server %s no longer offers tool %q", im.what(), name)
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	state := im.state(sess)
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(state.dead, func() { cancel(context.Cause(state.dead)) })
	defer stop()
	stopClosing := context.AfterFunc(im.closing, func() { cancel(context.Cause(im.closing)) })
	defer stopClosing()
	res, err := sess.CallTool(cctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		if ctx.Err() == nil && im.closing.Err() != nil {
			return nil, fmt.Errorf("MCP server %s: call %s: %w", im.what(), name, context.Cause(im.closing))
		}
		if ctx.Err() == nil && state.dead.Err() != nil { // the keepalive found the server silent
			return nil, fmt.Errorf("MCP server %s: call %s: %w", im.what(), name, context.Cause(state.dead))
		}
		if ctx.Err() == nil && (state.forgotten.Load() || broken(ctx, sess, err)) {
			// Later calls wait for the connection actor's restart instead
			// of trying this session, which its watch now closes. This
			// call is answered with its error, not sent again: it may
			// have run.
			im.link.drop(sess)
		}
		return nil, fmt.Errorf("MCP server %s: call %s: %w", im.what(), name, im.redact(err))
	}
	return valueOf(res)
}

// brokenPingTimeout bounds the ping with which broken tells a broken
// connection from a result it could not decode: a connection that broke
// fails a ping at once, so a ping not answered within it leaves the
// session be, and the call is answered with its own error, not held
// until its timeout by a busy or hung server.
const brokenPingTimeout = time.Second

// broken reports whether err, the error of a call on s that did not end
// with the call's own context, means that the connection broke. An
// answer of the server (a *jsonrpc.Error, which go-sdk also makes of a
// failure its transport kept to this call, such as an HTTP error status)
// does not; go-sdk's ErrConnectionClosed does. Any other error is either
// the connection breaking (a read error) or a result go-sdk could not
// decode on a healthy session (a content type of a newer protocol
// revision, say), and a ping tells them apart: a connection that broke
// fails it at once without sending, a healthy one answers it (an error
// answer counts). The ping has its own bound (brokenPingTimeout, and at
// most half the time the call has left), so that the call is answered
// with err before its timeout; a ping not answered in time leaves the
// session be: its watch notices a connection that ends.
func broken(ctx context.Context, s *sdk.ClientSession, err error) bool {
	var wire *jsonrpc.Error
	switch {
	case errors.Is(err, sdk.ErrConnectionClosed):
		return true
	case errors.As(err, &wire):
		return false
	}
	bound := brokenPingTimeout
	if d, ok := ctx.Deadline(); ok && time.Until(d)/2 < bound {
		bound = time.Until(d) / 2
	}
	pctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	err = s.Ping(pctx, nil)
	return err != nil && pctx.Err() == nil && !errors.As(err, &wire)
}

// valueOf is the tool result of an MCP result. An isError result is an
// error result: of the structuredContent when it is an object (the
// tool's own JSON, as a [Server] sends it), else of the text; its kind
// is tools.FailureInvalidArguments, tools.FailureNotFound or
// tools.FailureTooLarge when the server says so in _meta
// ([FailureKindMeta]), tools.FailureHandler otherwise.
func valueOf(res *sdk.CallToolResult) (any, error) {
	text := contentText(res.Content)
	if res.IsError {
		if text == "" {
			text = "the MCP tool reported an error"
		}
		// The kinds that say the call, not the tool, was wrong (or its
		// result too large for the server to send) come back; any other
		// failure of the remote tool is the handler's here.
		kind := tools.FailureHandler
		switch k, _ := res.Meta[FailureKindMeta].(string); tools.FailureKind(k) {
		case tools.FailureInvalidArguments, tools.FailureNotFound, tools.FailureTooLarge:
			kind = tools.FailureKind(k)
		}
		return nil, &tools.ResultError{Payload: errorPayload(res.StructuredContent, text), Kind: kind, Err: errors.New(text)}
	}
	if res.StructuredContent != nil {
		b, err := messages.Marshal(res.StructuredContent)
		if err != nil {
			return nil, fmt.Errorf("encode structured content: %w", err)
		}
		return json.RawMessage(b), nil
	}
	return text, nil
}

// errorPayload is the payload of an isError result: its structured
// content when that is an object, as the server wrote it when the text
// is its JSON (the structured content is decoded, its members' order
// lost), and otherwise {"success":false,"error":text}.
func errorPayload(structured any, text string) json.RawMessage {
	if _, ok := structured.(map[string]any); ok {
		var fromText any
		if json.Unmarshal([]byte(text), &fromText) == nil && reflect.DeepEqual(fromText, structured) {
			return json.RawMessage(text)
		}
		if b, err := messages.Marshal(structured); err == nil {
			return b
		}
	}
	b, _ := messages.Marshal(messages.ErrorResult{Success: false, Error: text}) // strings always encode
	return b
}

// contentText joins a result's content as text; what is not text is
// described in a line.
func contentText(content []sdk.Content) string {
	var parts []string
	for _, c := range content {
		switch v := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, v.Text)
		case *sdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes]", v.MIMEType, len(v.Data)))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes]", v.MIMEType, len(v.Data)))
		case *sdk.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource %s]", v.URI))
		case *sdk.EmbeddedResource:
			if v.Resource != nil && v.Resource.Text != "" {
				parts = append(parts, v.Resource.Text)
			} else if v.Resource != nil {
				parts = append(parts, fmt.Sprintf("[resource %s]", v.Resource.URI))
			}
		}
	}
	return strings.Join(parts, "\n")
}

// link is what the calls and the connection's incarnations share: the
// current session (nil while disconnected) and the names it offers.
type link struct {
	mu      sync.Mutex
	session *sdk.ClientSession
	offered map[string]bool
	ready   chan struct{} // closed when a session is set or the link is shut
	dropped chan struct{} // closed when the current session is dropped
	first   chan struct{} // closed when the first session's tools are in, or the first connection failed
	failed  error         // why the first connection failed
	last    error         // why the last connection failed or ended
	gone    error
	count   int
}

func newLink() *link {
	return &link{ready: make(chan struct{}), first: make(chan struct{})}
}

func offeredBy(list []*sdk.Tool) map[string]bool {
	offered := make(map[string]bool, len(list))
	for _, t := range list {
		offered[t.Name] = true
	}
	return offered
}

// set makes s the current session, offering list; the channel it
// returns is closed when s is dropped (see drop).
func (l *link) set(s *sdk.ClientSession, list []*sdk.Tool) (dropped <-chan struct{}) {
	offered := offeredBy(list)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.session, l.offered = s, offered
	l.dropped = make(chan struct{})
	l.count++
	select {
	case <-l.ready:
	default:
		close(l.ready)
	}
	return l.dropped
}

// listed says the first session's tools are in.
func (l *link) listed() {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.first:
	default:
		close(l.first)
	}
}

// connectFailed records why a connection failed; when no connection was
// ever made, Import returns it.
func (l *link) connectFailed(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last = err
	if l.count > 0 {
		return
	}
	select {
	case <-l.first:
	default:
		l.failed = err
		close(l.first)
	}
}

// relist records the names s offers now, when s is the current session.
func (l *link) relist(s *sdk.ClientSession, list []*sdk.Tool) {
	offered := offeredBy(list)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.session == s {
		l.offered = offered
	}
}

// current reports whether s is the current session.
func (l *link) current(s *sdk.ClientSession) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.session == s
}

// drop forgets s (when it is the current session), and tells its watch,
// which closes s: a session dropped while its connection still works
// would otherwise never end, and the connection never be restarted.
func (l *link) drop(s *sdk.ClientSession) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.session != s || l.gone != nil {
		return
	}
	l.session, l.offered = nil, nil
	close(l.dropped)
	l.ready = make(chan struct{})
}

// ended records why the current connection ended.
func (l *link) ended(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last = err
}

// givenUp shuts the link when the supervision gave up on the connection,
// saying why the last connection failed or ended.
func (l *link) givenUp() {
	l.mu.Lock()
	last := l.last
	l.mu.Unlock()
	err := errors.New("the connection to the MCP server was given up after repeated failures")
	if last != nil {
		err = fmt.Errorf("the connection to the MCP server was given up after repeated failures, the last: %w", last)
	}
	l.shut(err)
}

// shut makes every waiting and later call fail with err.
func (l *link) shut(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gone != nil {
		return
	}
	l.gone = err
	select {
	case <-l.ready:
	default:
		close(l.ready)
	}
}

func (l *link) connections() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count
}

func (l *link) wait(ctx context.Context) (*sdk.ClientSession, map[string]bool, error) {
	for {
		l.mu.Lock()
		s, offered, gone, ready := l.session, l.offered, l.gone, l.ready
		l.mu.Unlock()
		switch {
		case gone != nil:
			return nil, nil, gone
		case s != nil:
			return s, offered, nil
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("not connected: %w", context.Cause(ctx))
		}
	}
}

func (l *link) firstList(ctx context.Context) error {
	select {
	case <-l.first:
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.failed
	case <-ctx.Done():
		l.mu.Lock()
		gone := l.gone
		l.mu.Unlock()
		if gone != nil {
			return gone
		}
		return fmt.Errorf("no tool list: %w", context.Cause(ctx))
	}
}

// connectionSupervisor is the connection actor's parent: it supervises it
// with the import's strategy, and shuts the link when the strategy gives
// up on it.
type connectionSupervisor struct {
	im    *Imported
	child actors.Spec
}

func (p *connectionSupervisor) Receive(c actors.Context, msg any) {
	switch m := msg.(type) {
	case actors.Started:
		if _, err := c.Spawn(p.child); err != nil {
			c.Fail(fmt.Errorf("start MCP connection: %w", err))
		}
	case actors.ChildStopped:
		_ = m
		p.im.link.givenUp()
	}
}

// ServerGoneError is the failure of a connection whose session ended: the
// server process exited or the connection dropped.
type ServerGoneError struct {
	Server string
	Err    error
}

func (e *ServerGoneError) Error() string {
	if e.Err == nil {
		return "MCP server " + e.Server + " disconnected"
	}
	return fmt.Sprintf("MCP server %s disconnected: %v", e.Server, e.Err)
}

func (e *ServerGoneError) Unwrap() error { return e.Err }

// Job keys of a connection.
type (
	connectJob struct{}
	watchJob   struct{}
)

type connected struct {
	session *sdk.ClientSession
	list    []*sdk.Tool
	changes <-chan struct{} // notifications/tools/list_changed
	err     error
}

// connection is one incarnation of the connection actor: it connects
// (starting the server), lists its tools, publishes the session, and
// fails when the session ends so that its supervisor restarts it.
type connection struct {
	im      *Imported
	session *sdk.ClientSession
}

func (cn *connection) Receive(c actors.Context, msg any) {
	switch m := msg.(type) {
	case actors.Started:
		c.Go(connectJob{}, func(ctx context.Context, _ func(any)) any { return cn.im.connect(ctx) })
	case actors.AsyncDone:
		switch m.Key.(type) {
		case connectJob:
			r, _ := m.Value.(connected)
			if m.Err != nil {
				r.err = m.Err
			}
			r.err = cn.im.redact(r.err)
			if r.err != nil {
				cn.im.link.connectFailed(r.err)
				c.Fail(&ServerGoneError{Server: cn.im.what(), Err: r.err})
				return
			}
			cn.session = r.session
			dropped := cn.im.link.set(r.session, r.list)
			cn.im.refresh(r.session, r.list)
			cn.im.link.listed()
			s, changes := r.session, r.changes
			c.Go(watchJob{}, func(ctx context.Context, _ func(any)) any {
				done := make(chan error, 1)
				go func() { done <- s.Wait() }()
				silent := make(chan error, 1)
				pctx, stopPings := context.WithCancel(ctx)
				var pinging sync.WaitGroup
				pinging.Go(func() { cn.im.keepAlive(pctx, s, silent) })
				defer pinging.Wait()
				defer stopPings()
				for {
					select {
					case err := <-silent: // the server stopped answering: end its calls and the session
						cn.im.opts.Logger.Warn("MCP server silent: reconnecting", "server", cn.im.what(), "err", err)
						cn.im.state(s).kill(err)
						cn.im.link.drop(s)
						// Closing may take as long as the server holds
						// the session's DELETE: the restart does not wait
						// for it (Close does, closing what is still live).
						go cn.im.ended(s)
						return err
					case err := <-done:
						cn.im.link.drop(s) // at once: new calls wait for the restart
						cn.im.ended(s)     // releases what the session still holds (its subscription)
						return err
					case <-dropped: // a call found the connection broken: end it, to restart
						cn.im.ended(s)
						return errors.Join(errDropped, <-done)
					case <-ctx.Done(): // the incarnation ended: end the session
						cn.im.ended(s)
						<-done
						return nil
					case <-changes:
						// A list that cannot be read leaves the last one:
						// a session that broke is noticed by Wait.
						if list, err := cn.im.list(ctx, s); err != nil {
							cn.im.opts.Logger.Warn("MCP tool list not read again", "server", cn.im.what(), "err", cn.im.redact(err))
						} else {
							cn.im.link.relist(s, list)
							cn.im.refresh(s, list)
						}
					}
				}
			})
		case watchJob:
			cn.im.link.drop(cn.session)
			err, _ := m.Value.(error)
			if err == nil {
				err = errors.New("the session ended")
			}
			err = cn.im.redact(err)
			cn.im.link.ended(err)
			c.Fail(&ServerGoneError{Server: cn.im.what(), Err: err})
		}
	}
}

// connect starts or dials the server and reads its tool list. A session
// that cannot list its tools is closed.
func (im *Imported) connect(job context.Context) connected {
	im.liveMu.Lock()
	if im.tornDown {
		im.liveMu.Unlock()
		return connected{err: errImportClosed}
	}
	im.connects.Add(1) // never after the teardown's Wait began: tornDown is set first
	im.liveMu.Unlock()
	defer im.connects.Done()
	im.procMu.Lock()
	if im.killed {
		im.procMu.Unlock()
		return connected{err: errImportClosed}
	}
	if im.tracking {
		im.inflight.Add(1) // never after killStarted's Wait began: killed is set first
		defer im.inflight.Done()
	}
	im.procMu.Unlock()
	ctx, cancel := context.WithTimeout(job, im.opts.ConnectTimeout)
	defer cancel()
	stop := context.AfterFunc(im.abandoned, cancel)
	defer stop()
	var transport sdk.Transport
	state := newSessionState()
	if len(im.opts.Command) > 0 {
		// The command is not tied to ctx: it lives as long as the session,
		// which the watch job closes when the incarnation ends.
		cmd := exec.Command(im.opts.Command[0], im.opts.Command[1:]...)
		cmd.Dir = im.opts.Dir
		cmd.Stderr = im.opts.Stderr
		if len(im.opts.Env) > 0 {
			cmd.Env = append(cmd.Environ(), im.opts.Env...)
		}
		transport = rawTransport{schemas: &state.schemas, Transport: trackedTransport{im: im, cmd: cmd, Transport: &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}}}
	} else {
		var rt http.RoundTripper = im.http
		if im.opts.BearerToken != "" {
			rt = bearer{token: im.opts.BearerToken, to: im.endpoint, next: im.http}
		}
		rt = sameOriginRedirects{next: rt, to: im.endpoint}
		rt = sessionWatch{next: sessionEnd{next: rawReplies{next: rt, schemas: &state.schemas}, im: im}, forgotten: &state.forgotten}
		transport = &sdk.StreamableClientTransport{Endpoint: im.opts.URL, HTTPClient: &http.Client{Transport: rt, CheckRedirect: checkRedirect}}
	}
	changes := make(chan struct{}, 1)
	client := sdk.NewClient(&sdk.Implementation{Name: "polyweave", Version: DefaultServerVersion}, &sdk.ClientOptions{
		Logger: im.opts.Logger, // no KeepAlive: its pings end a silent session only once the calls in flight have (see keepAlive)
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			select {
			case changes <- struct{}{}:
			default: // a re-list is pending: it will read this change
			}
		}})
	s, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return connected{err: fmt.Errorf("connect: %w", err)}
	}
	if h := im.opts.hooks; h != nil && h.connected != nil {
		h.connected()
	}
	im.liveMu.Lock()
	im.live[s] = state
	im.liveMu.Unlock()
	list, err := im.list(ctx, s)
	if err != nil {
		im.ended(s)
		return connected{err: err}
	}
	if job.Err() != nil { // the incarnation ended meanwhile: nobody will watch s
		im.ended(s)
		return connected{err: job.Err()}
	}
	return connected{session: s, list: list, changes: changes}
}

// keepAlive pings s every KeepAlive until ctx ends, and sends on silent
// why it stopped when KeepAliveMisses pings in a row went unanswered,
// each within half of KeepAlive. An answer, an error answer included,
// counts; a server that does not know ping is not pinged further.
func (im *Imported) keepAlive(ctx context.Context, s *sdk.ClientSession, silent chan<- error) {
	every := im.opts.KeepAlive
	if every <= 0 {
		return
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	misses := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		pctx, cancel := context.WithTimeout(ctx, every/2)
		err := s.Ping(pctx, nil)
		cancel()
		var wire *jsonrpc.Error
		switch {
		case ctx.Err() != nil:
			return
		case errors.As(err, &wire) && wire.Code == jsonrpc.CodeMethodNotFound:
			return
		case err == nil || errors.As(err, &wire):
			misses = 0
			continue
		}
		misses++
		err = im.redact(err)
		if misses < im.opts.KeepAliveMisses {
			im.opts.Logger.Warn("MCP server did not answer a ping", "server", im.what(), "misses", misses, "err", err)
			continue
		}
		silent <- fmt.Errorf("the server did not answer %d pings in a row, %v apart: %w", misses, every, err)
		return
	}
}

// ended closes s (which ends a stdio server) and forgets it.
func (im *Imported) ended(s *sdk.ClientSession) {
	_ = s.Close()
	im.liveMu.Lock()
	delete(im.live, s)
	im.liveMu.Unlock()
}

// list reads the server's tool list, within ConnectTimeout, with each
// tool's schemas as the server wrote them (rawSchemas).
func (im *Imported) list(ctx context.Context, s *sdk.ClientSession) ([]*sdk.Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, im.opts.ConnectTimeout)
	defer cancel()
	schemas := &im.state(s).schemas
	var list []*sdk.Tool
	for t, err := range s.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list tools: %w", err)
		}
		schemas.exact(t)
		list = append(list, t)
	}
	return list, nil
}

// sessionState is what the import knows of one session besides the SDK.
type sessionState struct {
	// forgotten says the server answered a message of the session with
	// 404 Not Found: it no longer knows the session (it restarted, or the
	// session expired), and answers every later message so (sessionWatch;
	// stays false over stdio).
	forgotten atomic.Bool
	// schemas are the schemas of the tools as the server last listed
	// them, exactly as it wrote them.
	schemas rawSchemas
	// dead ends when the keepalive found the server silent (its cause
	// says so): the calls in flight on the session end with it.
	dead context.Context
	kill context.CancelCauseFunc
}

func newSessionState() *sessionState {
	st := &sessionState{}
	st.dead, st.kill = context.WithCancelCause(context.Background())
	return st
}

// state returns the state of s; one that is no longer live (closed
// meanwhile) has a fresh state, which changes nothing for a call on it.
func (im *Imported) state(s *sdk.ClientSession) *sessionState {
	im.liveMu.Lock()
	defer im.liveMu.Unlock()
	if st := im.live[s]; st != nil {
		return st
	}
	return newSessionState()
}

// sessionWatch notes when the server answers a message of a session (a
// POST with an Mcp-Session-Id header) with 404 Not Found, which is how a
// streamable HTTP server says it no longer knows the session (MCP
// transports, session management). go-sdk hands the call a JSON-RPC
// error body of such an answer (the TypeScript SDK's servers send
// "Session not found") as the server's answer and keeps the session; the
// import must connect again instead. A 404 for the GET of the session's
// event stream is not one: many servers answer it so, instead of 405, for
// a stream they do not offer, and go-sdk goes on without the stream; nor
// is a 404 for the DELETE that ends a session.
type sessionWatch struct {
	next      http.RoundTripper
	forgotten *atomic.Bool
}

func (w sessionWatch) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := w.next.RoundTrip(r)
	if err == nil && res.StatusCode == http.StatusNotFound && r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") != "" {
		w.forgotten.Store(true)
	}
	return res, err
}

// sessionEndTimeout bounds the DELETE that ends an HTTP session: a
// server that has not answered it by then is not waited for (go-sdk's
// own bound is longer), so that closing an import, or restarting its
// connection, is not held by a silent server.
const sessionEndTimeout = 2 * time.Second

// sessionEnd bounds the DELETE that ends a session (sessionEndTimeout)
// and gives it up once a Close's context has ended (givenUp). A DELETE
// that fails, or is cut short so, is reported (sessionNotEnded), and so
// is one the server answers with an error status (go-sdk closes the
// answer and says nothing), but for 405 Method Not Allowed, with which a
// server that does not let clients end sessions answers (MCP transports,
// session management), and 404 Not Found, with which it answers for a
// session it no longer knows, one it ended already. A redirect did not
// end the session either, and is reported: it is not followed
// (checkRedirect).
type sessionEnd struct {
	next http.RoundTripper
	im   *Imported
}

func (e sessionEnd) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodDelete {
		return e.next.RoundTrip(r)
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	stop := context.AfterFunc(e.im.givenUp, func() { cancel(context.Cause(e.im.givenUp)) })
	defer stop()
	ctx, cancelTimeout := context.WithTimeoutCause(ctx, sessionEndTimeout,
		fmt.Errorf("the server did not answer its DELETE within %v: %w", sessionEndTimeout, context.DeadlineExceeded))
	defer cancelTimeout()
	res, err := e.next.RoundTrip(r.WithContext(ctx))
	switch {
	case err != nil:
		why := err
		if ctx.Err() != nil { // given up, or out of time
			why = context.Cause(ctx)
		}
		e.im.sessionNotEnded("MCP server not told the session ended", fmt.Errorf("the server was not told the session ended: %w", why))
	case res.StatusCode >= 300 && res.StatusCode < 400:
		// Nor its Location, which the server writes as it likes, and
		// which may carry a token.
		e.im.sessionNotEnded("MCP server did not end the session", fmt.Errorf("the server did not end the session: it answered the DELETE with HTTP %d %s, a redirect, which is not followed",
			res.StatusCode, http.StatusText(res.StatusCode)))
	case res.StatusCode >= 400 && res.StatusCode != http.StatusMethodNotAllowed && res.StatusCode != http.StatusNotFound:
		// The status's own text, not the server's reason, which it writes
		// as it likes. (The URL is the import's, which the error names.)
		e.im.sessionNotEnded("MCP server did not end the session", fmt.Errorf("the server did not end the session: it answered the DELETE with HTTP %d %s",
			res.StatusCode, http.StatusText(res.StatusCode)))
	}
	return res, err
}

// checkRedirect is the CheckRedirect of an import's HTTP client. The
// redirect of a DELETE, which ends a session, is not followed (the
// client returns the redirect, which sessionEnd reports): http.Client
// would follow 301, 302 and 303 with a GET, whose answer says nothing of
// the session, and 307 and 308 with a DELETE elsewhere than where the
// session was opened. Nor is a redirect that would change the method of
// another request: http.Client sends a POST redirected with 301, 302 or
// 303 on as a GET without its body, which would lose the JSON-RPC
// message it carries and read whatever answers the GET as the answer to
// it; the request fails, saying so. 307 and 308 keep the method and the
// body, and are followed as http.Client's default policy does, on the
// import's origin only. sameOriginRedirects refuses both before
// http.Client sees the redirect, so that the error does not quote the
// redirect's Location, which the server writes as it likes (a token in
// its query): an error of CheckRedirect would, as http.Client names the
// request it would send; what checkRedirect refuses of them is a backstop.
// Its error past ten redirects does quote that Location, user info,
// query and fragment included: redact cuts them out, as of any URL an
// import's error quotes (urlredact.Text).
func checkRedirect(req *http.Request, via []*http.Request) error {
	first := via[0]
	switch {
	case first.Method == http.MethodDelete:
		return http.ErrUseLastResponse
	case req.Method != first.Method:
		status := 0
		if req.Response != nil {
			status = req.Response.StatusCode
		}
		return fmt.Errorf("the server redirected the %s with HTTP %d %s, which would send it on as a %s: not followed",
			first.Method, status, http.StatusText(status), req.Method)
	case len(via) >= 10:
		return errors.New("stopped after 10 redirects") // http.Client's default
	}
	return nil
}

// sessionNotEnded reports that a session's DELETE did not end it (err
// says why): once Close was called in the teardown's error, otherwise (a
// restart, which goes on without it) in the log, as msg.
func (im *Imported) sessionNotEnded(msg string, err error) {
	err = im.redact(err) // the transport's error, which may quote what it sent a proxy
	if im.closing.Err() == nil && im.givenUp.Err() == nil {
		im.opts.Logger.Warn(msg, "server", im.what(), "err", err)
		return
	}
	im.endMu.Lock()
	defer im.endMu.Unlock()
	im.endErr = errors.Join(im.endErr, fmt.Errorf("mcp: close import %s: %w", im.what(), err))
}

// bearer adds an Authorization header to each request to the origin
// (scheme, host and port) of the URL to: not to a place a server
// redirects the client to (http.Client follows the redirects of a POST,
// and this transport, below it, sees each as a request of its own),
// which may be another server's, or the same host without TLS.
type bearer struct {
	token string
	to    *url.URL
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if !origin.Same(r.URL, b.to) {
		return b.next.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// sameOriginRedirects fails a request (other than a DELETE: see
// checkRedirect) that the server redirects to another origin than the
// import's URL (scheme, host and port), with any status, or on its
// origin with a status that would change its method (see checkRedirect),
// before http.Client sees the redirect: a session lives on the server it was
// opened with, and what a request carries (its JSON-RPC message, the
// Mcp-Session-Id header, headers a proxy or the caller's transport adds)
// is for that server alone. The error names the status, not the place
// the redirect points to: http.Client's errors would quote that URL as
// the server wrote it, user info and query included (see ImportOptions.URL).
type sameOriginRedirects struct {
	next http.RoundTripper
	to   *url.URL
}

func (s sameOriginRedirects) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := s.next.RoundTrip(r)
	if err != nil || r.Method == http.MethodDelete || res.Header.Get("Location") == "" {
		return res, err // http.Client returns a redirect without a Location as it is
	}
	if origin.Leaves(res, r.URL, s.to) {
		_ = res.Body.Close()
		return nil, fmt.Errorf("the server redirected the %s with HTTP %d %s to another origin (or to a URL that does not parse): not followed",
			r.Method, res.StatusCode, http.StatusText(res.StatusCode))
	}
	switch res.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther:
		if r.Method != http.MethodGet && r.Method != http.MethodHead { // http.Client would send it on as a GET
			_ = res.Body.Close()
			return nil, fmt.Errorf("the server redirected the %s with HTTP %d %s, which would send it on as a GET: not followed",
				r.Method, res.StatusCode, http.StatusText(res.StatusCode))
		}
	}
	return res, nil
}
