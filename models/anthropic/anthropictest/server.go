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

	"github.com/polyweave/polyweave-go/models/internal/ssefake"
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
	// Server records the requests: Client, Close, Requests and Headers.
	*ssefake.Server
}

// NewServer starts a server answering with turns.
func NewServer(turns []scripted.Turn) *Server {
	srv := ssefake.NewServer(turns, ssefake.Endpoint{
		Serves: func(path string) bool { return path == "/v1/messages" },
		Error:  WriteError,
		Play: func(w http.ResponseWriter, r *http.Request, turn scripted.Turn, n int, model string) {
			st := &Stream{W: w, r: r}
			st.play(turn, fmt.Sprintf("msg_test%02d", n), model)
		},
	})
	return &Server{URL: srv.Root() + "/", Server: srv}
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
func (s *Stream) Event(typ, data string) { ssefake.Send(s.W, &s.started, typ, data) }

// Quote encodes v as a JSON string.
func Quote(v string) string {
	b, _ := json.Marshal(v)
	return string(b)
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
	pace := ssefake.Pacer(s.r, t)
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
		args, pieces := ssefake.Pieces(c)
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
