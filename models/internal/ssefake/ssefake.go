// Package ssefake is what the fake provider servers of
// models/anthropic/anthropictest and models/openai/openaitest share: an
// httptest server that answers the n-th request with turn n of a script
// and records the requests, and the writing and pacing of server-sent
// events. The wire format of each provider stays in its own package.
package ssefake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/polyweave/polyweave-go/models/scripted"
)

// Endpoint is what tells one provider's fake server from another's.
type Endpoint struct {
	// Serves reports whether a request path is the endpoint's.
	Serves func(path string) bool
	// Error answers with an HTTP error status and the provider's error
	// body; typ is the Messages API's error type ("not_found_error",
	// "invalid_request_error", "api_error"), for providers that send one.
	Error func(w http.ResponseWriter, status int, typ, message string)
	// Play streams turn (the n-th request's) to a request that asked for
	// model.
	Play func(w http.ResponseWriter, r *http.Request, turn scripted.Turn, n int, model string)
}

// Server is a running fake endpoint. The n-th request it receives is
// answered with turn n; requests past the last turn get HTTP 500, and so
// does a turn with Error and nothing to stream. Its methods are safe for
// concurrent use.
type Server struct {
	srv   *httptest.Server
	turns []scripted.Turn
	ep    Endpoint

	mu       sync.Mutex
	requests []map[string]json.RawMessage
	headers  []http.Header
}

// NewServer starts a server answering with turns the way ep says.
func NewServer(turns []scripted.Turn, ep Endpoint) *Server {
	s := &Server{turns: turns, ep: ep}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Root is the server's URL, without a path.
func (s *Server) Root() string { return s.srv.URL }

// Client returns an HTTP client for the server; Close releases its
// connections.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// Close shuts the server down, waiting for requests in progress.
func (s *Server) Close() { s.srv.Close() }

// Requests returns the bodies of the requests received so far, each as
// its top-level fields.
func (s *Server) Requests() []map[string]json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]json.RawMessage(nil), s.requests...)
}

// Headers returns the headers of the requests received so far.
func (s *Server) Headers() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.headers...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !s.ep.Serves(r.URL.Path) {
		s.ep.Error(w, http.StatusNotFound, "not_found_error", "no such endpoint: "+r.Method+" "+r.URL.Path)
		return
	}
	var body map[string]json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		s.ep.Error(w, http.StatusBadRequest, "invalid_request_error", "body is not a JSON object: "+err.Error())
		return
	}
	s.mu.Lock()
	n := len(s.requests)
	s.requests = append(s.requests, body)
	s.headers = append(s.headers, r.Header.Clone())
	s.mu.Unlock()
	if n >= len(s.turns) {
		s.ep.Error(w, http.StatusInternalServerError, "api_error", fmt.Sprintf("script exhausted: no turn %d", n))
		return
	}
	var model string
	_ = json.Unmarshal(body["model"], &model)
	turn := s.turns[n]
	if turn.Error != "" && turn.Text == "" && len(turn.ToolCalls) == 0 {
		s.ep.Error(w, http.StatusInternalServerError, "api_error", turn.Error)
		return
	}
	s.ep.Play(w, r, turn, n, model)
}

// Send writes one server-sent event (with an event line when event is
// not empty) and flushes it. The first event of a response (*started
// false) sends the headers: 200, text/event-stream, no-cache.
func Send(w http.ResponseWriter, started *bool, event, data string) {
	if !*started {
		*started = true
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
	}
	text := "data: " + data + "\n\n"
	if event != "" {
		text = "event: " + event + "\n" + text
	}
	_, _ = fmt.Fprint(w, text)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// Wait waits for d, or until the client of r has gone; it reports
// whether to go on.
func Wait(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return r.Context().Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// Pacer returns the wait before each piece of t's answer to r: Delay
// before the first, Pace before the others. It reports whether to go on.
func Pacer(r *http.Request, t scripted.Turn) func() bool {
	first := true
	return func() bool {
		d := t.Pace
		if first {
			d, first = t.Delay, false
		}
		return Wait(r, d)
	}
}

// Pieces returns a call's whole arguments and the pieces to stream them
// in: its Chunks, or its arguments Split; none when it has neither.
func Pieces(c scripted.ToolCall) (args string, pieces []string) {
	args, pieces = c.Arguments, c.Chunks
	if args == "" {
		args = strings.Join(pieces, "")
	}
	if len(pieces) == 0 && c.Split > 1 {
		pieces = scripted.Split(args, c.Split)
	}
	return args, pieces
}
