package tools_test

import (
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/tools"
)

// lateEndModel is a model adapter that fails its first response with
// ERROR at once and sends that response's END only endLag later (an
// adapter winding a failed request down), answering the requests that
// come meanwhile after it, in order. Its second request gets a call of
// weather, every later one a text answer. It records the messages of
// each request.
type lateEndModel struct {
	mu       sync.Mutex
	requests [][]string // role:content of each request's messages
	tools    []bool     // whether each request carried the tools PARAM
}

const endLag = time.Second

type heldEnd struct{ stream string }

func (m *lateEndModel) spec() actors.Spec {
	return actors.Spec{Name: "model", New: func() actors.Logic {
		var params []*messages.Frame // of the request being sent
		var queued []int             // requests waiting for the held END
		held := false
		answer := func(c actors.Context, stream string, n int) {
			switch n {
			case 0:
				c.Emit(messages.Error(stream, "upstream 503"))
				c.After(endLag, heldEnd{stream})
				held = true
			case 1:
				c.Emit(messages.ToolCall(stream, "c1", "weather", json.RawMessage(`{"city":"Paris"}`)))
				c.Emit(messages.End(stream))
			default:
				c.Emit(messages.Text(stream, "Done."))
				c.Emit(messages.End(stream))
			}
		}
		return actors.LogicFunc(func(c actors.Context, msg any) {
			switch msg := msg.(type) {
			case actors.Timer:
				h := msg.Key.(heldEnd)
				c.Emit(messages.End(h.stream))
				held = false
				for _, n := range queued {
					answer(c, h.stream, n)
				}
				queued = nil
			case *messages.Frame:
				switch msg.GetType() {
				case messages.FrameType_PARAM:
					params = append(params, msg)
				case messages.FrameType_END:
					n := m.record(params)
					params = nil
					if held {
						queued = append(queued, n)
						return
					}
					answer(c, msg.GetStreamId(), n)
				}
			}
		})
	}}
}

// record notes a request's PARAMs and returns its number, from 0.
func (m *lateEndModel) record(params []*messages.Frame) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	var msgs []string
	withTools := false
	for _, p := range params {
		switch {
		case p.IsParam(models.ParamTools):
			withTools = true
		case p.IsParam(models.ParamMessages):
			list, _ := models.DecodeMessages(p.GetPayload())
			for _, msg := range list {
				msgs = append(msgs, msg.Role+":"+msg.Content)
			}
		}
	}
	m.requests = append(m.requests, msgs)
	m.tools = append(m.tools, withTools)
	return len(m.requests) - 1
}

// TestLoop_StreamReusedAfterModelError: a consumer that sends a new
// request on a stream as soon as the loop ended it (the model failed its
// response with ERROR, and sends the response's END a little later)
// gets a conversation of its own: the loop's END comes once the model
// has ended its response, so the new request is not taken into the
// failed one, and the model gets it, and its follow-up, as a fresh
// stream's (with the tools, and the user's message).
func TestLoop_StreamReusedAfterModelError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newRuntime(t)
		model := &lateEndModel{}
		spec, err := tools.NewLoop(model.spec(), &tools.LoopOptions{RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{weather()}}})
		if err != nil {
			t.Fatal(err)
		}
		conn := start(t, rt, spec)
		ask := func(text string) []*messages.Frame {
			msgs, _ := json.Marshal([]map[string]string{{"role": "user", "content": text}})
			if err := conn.SendAll(messages.RawParam("s1", models.ParamMessages, msgs), messages.End("s1")); err != nil {
				t.Fatal(err)
			}
			out, err := conn.RecvStream(testCtx(t), "s1")
			if err != nil {
				t.Fatalf("%v after %q", err, lines(out))
			}
			return out
		}
		first := ask("First question.")
		if want := []string{`ERROR stream=s1 text="upstream 503"`, `END stream=s1`}; !slices.Equal(lines(first), want) {
			t.Fatalf("the failed request: %q, want %q", lines(first), want)
		}
		second := ask("Weather in Paris?")
		if got := lines(second); len(got) != 4 || got[3] != `END stream=s1` || got[2] != `TEXT stream=s1 text="Done."` {
			t.Errorf("the second request: %q, want its call, result, answer and END", got)
		}
		model.mu.Lock()
		defer model.mu.Unlock()
		wantMsgs := [][]string{
			{"user:First question."},
			{"user:Weather in Paris?"},
			{"user:Weather in Paris?", "assistant:", `tool:{"celsius":18,"city":"Paris"}`},
		}
		if !slices.EqualFunc(model.requests, wantMsgs, slices.Equal) {
			t.Errorf("the model got the messages %q, want %q", model.requests, wantMsgs)
		}
		if want := []bool{true, true, true}; !slices.Equal(model.tools, want) {
			t.Errorf("tools PARAM in the requests: %v, want %v", model.tools, want)
		}
	})
}
