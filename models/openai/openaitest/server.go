// Package openaitest is a fake OpenAI-compatible Chat Completions server
// for tests: it streams scripted turns ([scripted.Turn]) as server-sent
// events shaped like OpenAI's, and records the requests it receives.
//
// It lets a test (or the demo's end-to-end tests) run the real OpenAI
// adapter, HTTP and SSE included, against a known conversation:
//
//	srv := openaitest.NewServer(script.Turns)
//	defer srv.Close()
//	model, err := openai.New(&openai.Options{BaseURL: srv.URL, Model: "test", HTTPClient: srv.Client()})
package openaitest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/polyweave/polyweave-go/models/internal/ssefake"
	"github.com/polyweave/polyweave-go/models/scripted"
)

// Server is a running fake endpoint. The n-th request it receives is
// answered with turn n; requests past the last turn get HTTP 500. Its
// methods are safe for concurrent use.
//
// How a turn is streamed: a first chunk with the assistant role, one chunk
// per text delta, then for each tool call a first fragment with index, id,
// type and name and empty arguments followed by one fragment per argument
// piece (or the whole arguments in the first fragment for an atomic
// call); pieces of streaming calls go round-robin with Interleave. Then a
// chunk with an empty delta and the finish reason, a usage chunk with
// empty choices when the turn has Usage, and [DONE]. A turn with Error
// and nothing to stream gets HTTP 500 with an OpenAI error body; with
// content, the content is streamed and then an error event ends the
// stream. Delay and Pace are waited for (real time); a Stall turn holds the
// stream open until the client goes away.
type Server struct {
	// URL is the base URL to give the adapter (it ends in /v1).
	URL string
	// Server records the requests: Client (whose connections Close
	// releases), Close, Requests and Headers.
	*ssefake.Server
}

// NewServer starts a server answering with turns.
func NewServer(turns []scripted.Turn) *Server {
	srv := ssefake.NewServer(turns, ssefake.Endpoint{
		Serves: func(path string) bool { return strings.HasSuffix(path, "/chat/completions") },
		Error:  writeError,
		Play: func(w http.ResponseWriter, r *http.Request, turn scripted.Turn, n int, model string) {
			st := &sse{w: w, r: r, id: fmt.Sprintf("chatcmpl-test%d", n), model: model}
			st.play(turn)
		},
	})
	return &Server{URL: srv.Root() + "/v1", Server: srv}
}

// writeError answers with an HTTP error status and an OpenAI error body
// (of type server_error, whatever typ).
func writeError(w http.ResponseWriter, status int, _, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-should-retry", "false")
	w.WriteHeader(status)
	body, _ := json.Marshal(map[string]any{"error": map[string]any{"message": message, "type": "server_error", "param": nil, "code": nil}})
	_, _ = w.Write(body)
}

// sse writes one streamed answer.
type sse struct {
	w       http.ResponseWriter
	r       *http.Request
	id      string
	model   string
	started bool
}

func (s *sse) send(data string) { ssefake.Send(s.w, &s.started, "", data) }

// chunk sends a chat.completion.chunk whose choices are choices (raw JSON).
func (s *sse) chunk(choices string, extra string) {
	s.send(fmt.Sprintf(`{"id":%q,"object":"chat.completion.chunk","created":1700000000,"model":%q,"system_fingerprint":"fp_test","choices":%s%s}`,
		s.id, s.model, choices, extra))
}

func (s *sse) delta(delta string) {
	s.chunk(`[{"index":0,"delta":`+delta+`,"logprobs":null,"finish_reason":null}]`, "")
}

func quote(v string) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func (s *sse) play(t scripted.Turn) {
	pace := ssefake.Pacer(s.r, t)
	if !pace() {
		return
	}
	s.delta(`{"role":"assistant","content":"","refusal":null}`)
	if t.Text != "" {
		for _, piece := range scripted.Split(t.Text, t.Deltas) {
			if !pace() {
				return
			}
			s.delta(`{"content":` + quote(piece) + `}`)
		}
	}
	var fragments [][]string // per streaming call: its argument pieces
	for i, c := range t.ToolCalls {
		args, pieces := ssefake.Pieces(c)
		first0 := ""
		if len(pieces) == 0 {
			first0 = args
		}
		if !pace() {
			return
		}
		s.delta(fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":%s,"type":"function","function":{"name":%s,"arguments":%s}}]}`,
			i, quote(c.ID), quote(c.Name), quote(first0)))
		var rest []string
		for _, p := range pieces {
			rest = append(rest, fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]}`, i, quote(p)))
		}
		if t.Interleave {
			fragments = append(fragments, rest)
			continue
		}
		for _, d := range rest {
			if !pace() {
				return
			}
			s.delta(d)
		}
	}
	for more := true; more; {
		more = false
		for i := range fragments {
			if len(fragments[i]) > 0 {
				if !pace() {
					return
				}
				s.delta(fragments[i][0])
				fragments[i] = fragments[i][1:]
				more = true
			}
		}
	}
	if t.Stall {
		<-s.r.Context().Done()
		return
	}
	if t.Error != "" {
		s.send(`{"error":{"message":` + quote(t.Error) + `,"type":"server_error","param":null,"code":null}}`)
		return
	}
	finish := t.Finish
	if finish == "" {
		finish = "stop"
		if len(t.ToolCalls) > 0 {
			finish = "tool_calls"
		}
	}
	if !pace() {
		return
	}
	s.chunk(`[{"index":0,"delta":{},"logprobs":null,"finish_reason":`+quote(finish)+`}]`, "")
	if t.Usage != nil {
		usage, _ := json.Marshal(t.Usage)
		s.chunk(`[]`, `,"usage":`+string(usage))
	}
	s.send("[DONE]")
}
