// Package anthropictest is a fake Anthropic Messages API server for tests:
// it streams scripted turns ([scripted.Turn]) as server-sent events shaped
// exactly like the Messages API's, and records the requests it receives.
//
// It lets a test run the real Anthropic adapter, HTTP and SSE included,
// against a known conversation:
//
//	srv := anthropictest.NewServer(script.Turns)
//	defer srv.Close()
//	model, err := anthropic.New(&anthropic.Options{BaseURL: srv.URL, Model: "test", HTTPClient: srv.Client()})
package anthropictest

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

// Server is a running fake endpoint. The n-th request it receives is
// answered with turn n; requests past the last turn get HTTP 500. Its
// methods are safe for concurrent use.
//
// How a turn is streamed: message_start (with the turn's prompt tokens as
// input_tokens) and a ping, a text block at index 0 with one text_delta
// per piece of the text, then one tool_use block per call, each opened
// with an empty input and filled with input_json_delta pieces (a first
// empty one, then the Chunks, the Split pieces or the whole arguments);
// with Interleave every tool_use block is opened first and the pieces go
// round-robin. Then message_delta with the stop reason (tool_use or
// end_turn, or Finish mapped: "stop" → end_turn, "tool_calls" → tool_use,
// "length" → max_tokens, others as they are) and the output tokens, and
// message_stop. A turn with Error and nothing to stream gets HTTP 500
// with an api_error body; with content, the content is streamed and an
// error event (overloaded_error) ends the stream. Delay and Pace are
// waited for (real time); a Stall turn holds the stream open until the
// client goes away.
type Server struct {
	// URL is the base URL to give the adapter.
	URL string

	srv   *httptest.Server
	turns []scripted.Turn

	mu       sync.Mutex
	requests []map[string]json.RawMessage
	headers  []http.Header
}

// NewServer starts a server answering with turns.
func NewServer(turns []scripted.Turn) *Server {
	s := &Server{turns: turns}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL + "/"
	return s
}

// Client returns an HTTP client for the server.
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
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		WriteError(w, http.StatusNotFound, "not_found_error", "no such endpoint: "+r.Method+" "+r.URL.Path)
		return
	}
	var body map[string]json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		WriteError(w, http.StatusBadRequest, "invalid_request_error", "body is not a JSON object: "+err.Error())
		return
	}
	s.mu.Lock()
	n := len(s.requests)
	s.requests = append(s.requests, body)
	s.headers = append(s.headers, r.Header.Clone())
	s.mu.Unlock()
	if n >= len(s.turns) {
		WriteError(w, http.StatusInternalServerError, "api_error", fmt.Sprintf("script exhausted: no turn %d", n))
		return
	}
	var model string
	_ = json.Unmarshal(body["model"], &model)
	turn := s.turns[n]
	if turn.Error != "" && turn.Text == "" && len(turn.ToolCalls) == 0 {
		WriteError(w, http.StatusInternalServerError, "api_error", turn.Error)
		return
	}
	st := &Stream{W: w, r: r}
	st.play(turn, fmt.Sprintf("msg_test%02d", n), model)
}

// WriteError answers with an HTTP error status and a Messages API error
// body.
func WriteError(w http.ResponseWriter, status int, typ, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-should-retry", "false")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, `{"type":"error","error":{"type":%s,"message":%s},"request_id":"req_test"}`, Quote(typ), Quote(message))
}

// Stream writes server-sent events of the Messages API.
type Stream struct {
	W       http.ResponseWriter
	r       *http.Request
	started bool
}

// Event sends one event named typ with data (JSON) and flushes it.
func (s *Stream) Event(typ, data string) {
	if !s.started {
		s.started = true
		s.W.Header().Set("Content-Type", "text/event-stream")
		s.W.Header().Set("Cache-Control", "no-cache")
		s.W.WriteHeader(http.StatusOK)
	}
	_, _ = fmt.Fprintf(s.W, "event: %s\ndata: %s\n\n", typ, data)
	if f, ok := s.W.(http.Flusher); ok {
		f.Flush()
	}
}

// Quote encodes v as a JSON string.
func Quote(v string) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// wait waits for d, or until the client has gone; it reports whether to
// go on.
func (s *Stream) wait(d time.Duration) bool {
	if d <= 0 {
		return s.r.Context().Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.r.Context().Done():
		return false
	}
}

// StopReason maps a scripted finish reason to the Messages API's.
func StopReason(t scripted.Turn) string {
	switch t.Finish {
	case "":
		if len(t.ToolCalls) > 0 {
			return "tool_use"
		}
		return "end_turn"
	case "stop":
		return "end_turn"
	case "tool_calls":
		return "tool_use"
	case "length":
		return "max_tokens"
	}
	return t.Finish
}

func (s *Stream) play(t scripted.Turn, id, model string) {
	first := true
	pace := func() bool {
		d := t.Pace
		if first {
			d, first = t.Delay, false
		}
		return s.wait(d)
	}
	var in, out int
	if t.Usage != nil {
		in, out = t.Usage.PromptTokens, t.Usage.CompletionTokens
	}
	if !pace() {
		return
	}
	s.Event("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":%s,"type":"message","role":"assistant","model":%s,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1,"service_tier":"standard"}}}`,
		Quote(id), Quote(model), in))
	s.Event("ping", `{"type": "ping"}`)
	index := 0
	if t.Text != "" {
		s.Event("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}`, index))
		for _, piece := range scripted.Split(t.Text, t.Deltas) {
			if !pace() {
				return
			}
			s.Event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%s}}`, index, Quote(piece)))
		}
		s.Event("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, index))
		index++
	}
	type open struct {
		index  int
		pieces []string
	}
	var calls []open
	for _, c := range t.ToolCalls {
		args := c.Arguments
		pieces := c.Chunks
		if args == "" {
			args = strings.Join(pieces, "")
		}
		if len(pieces) == 0 && c.Split > 1 {
			pieces = scripted.Split(args, c.Split)
		}
		if len(pieces) == 0 && args != "" {
			pieces = []string{args}
		}
		if !pace() {
			return
		}
		s.Event("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":%s,"name":%s,"input":{}}}`,
			index, Quote(c.ID), Quote(c.Name)))
		s.Event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":""}}`, index))
		o := open{index: index, pieces: pieces}
		index++
		if t.Interleave {
			calls = append(calls, o)
			continue
		}
		if !s.pieces(o.index, o.pieces, pace) {
			return
		}
		s.Event("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, o.index))
	}
	for more := true; more; {
		more = false
		for i := range calls {
			if len(calls[i].pieces) > 0 {
				if !s.pieces(calls[i].index, calls[i].pieces[:1], pace) {
					return
				}
				calls[i].pieces = calls[i].pieces[1:]
				more = true
			}
		}
	}
	for _, c := range calls {
		s.Event("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, c.index))
	}
	if t.Stall {
		<-s.r.Context().Done()
		return
	}
	if t.Error != "" {
		s.Event("error", `{"type":"error","error":{"type":"overloaded_error","message":`+Quote(t.Error)+`}}`)
		return
	}
	if !pace() {
		return
	}
	s.Event("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%s,"stop_sequence":null},"usage":{"output_tokens":%d}}`, Quote(StopReason(t)), out))
	s.Event("message_stop", `{"type":"message_stop"}`)
}

func (s *Stream) pieces(index int, pieces []string, pace func() bool) bool {
	for _, p := range pieces {
		if !pace() {
			return false
		}
		s.Event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, index, Quote(p)))
	}
	return true
}
