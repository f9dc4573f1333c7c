package resilience_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/anthropic"
	"github.com/polyweave/polyweave-go/models/anthropic/anthropictest"
	"github.com/polyweave/polyweave-go/models/modeltest"
	"github.com/polyweave/polyweave-go/models/resilience"
)

// answer is a whole streamed Messages API answer saying text.
func answer(text string) string {
	ev := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	return ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}`) +
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
		ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":%q}}`, text)) +
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`) +
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}`) +
		ev("message_stop", `{"type":"message_stop"}`)
}

func writeSSE(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = io.WriteString(w, body)
}

// hangUp closes the connection without answering: a reset before the
// first byte of the response.
func hangUp(t *testing.T, w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return
	}
	_ = conn.Close()
}

// setup runs an Anthropic adapter over a resilient transport against a
// server answering request n with handle(n, w), and returns a function
// that sends one request on a stream and returns its frames, the
// recorded back-off delays and the server's request count. The server is
// reached over an in-memory network ([modeltest.NewMemRig]): call it
// inside a testing/synctest bubble, where the bounds of the answer and
// of the test's reads run on the bubble's clock, so that a loaded
// machine cannot meet them, and a test stuck for good is reported as
// such at once rather than when they pass.
type setup struct {
	rig    *modeltest.Rig
	mu     sync.Mutex
	delays []time.Duration
	served atomic.Int32
}

func newSetup(t *testing.T, opts resilience.Options, handle func(n int, w http.ResponseWriter)) *setup {
	t.Helper()
	s := &setup{}
	opts.Sleep = func(ctx context.Context, d time.Duration) error {
		s.mu.Lock()
		s.delays = append(s.delays, d)
		s.mu.Unlock()
		return ctx.Err() // time is an input: the wait is recorded, not spent
	}
	s.rig = modeltest.NewMemRig(t, func(n int, w http.ResponseWriter, _ *http.Request, _ map[string]json.RawMessage) {
		s.served.Add(1)
		handle(n, w)
	}, func(url string, client *http.Client) actors.Spec {
		tr, err := resilience.New(client.Transport, &opts)
		if err != nil {
			t.Fatal(err)
		}
		return modeltest.Must(anthropic.New(&anthropic.Options{BaseURL: url, Model: "claude-test", HTTPClient: tr.Client(), MaxRetries: anthropic.NoRetries}))(t).Spec("model")
	})
	return s
}

func (s *setup) ask(t *testing.T, stream string) (*models.Response, []resilience.Event) {
	t.Helper()
	frames, r := s.rig.AskFrames(stream, models.Param{Name: models.ParamMessages, Value: json.RawMessage(`[{"role":"user","content":"hi"}]`)})
	var events []resilience.Event
	for _, f := range frames {
		if f.GetType() == messages.FrameType_META && f.GetName() == resilience.MetaEvent {
			var ev resilience.Event
			if err := json.Unmarshal(f.GetPayload(), &ev); err != nil {
				t.Fatal(err)
			}
			events = append(events, ev)
		}
	}
	return r, events
}

func TestTransport_RetriesRateLimitAndUnavailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSetup(t, resilience.Options{BaseDelay: 100 * time.Millisecond}, func(n int, w http.ResponseWriter) {
			switch n {
			case 0:
				w.Header().Set("Retry-After", "7")
				anthropictest.WriteError(w, http.StatusTooManyRequests, "rate_limit_error", "slow down")
			case 1:
				anthropictest.WriteError(w, http.StatusServiceUnavailable, "overloaded_error", "try later")
			default:
				writeSSE(w, answer("made it"))
			}
		})
		r, events := s.ask(t, "s1")
		if r.Failed || r.Text != "made it" {
			t.Fatalf("answer %+v", r)
		}
		if n := s.served.Load(); n != 3 {
			t.Fatalf("server got %d requests, want 3", n)
		}
		if len(s.delays) != 2 || s.delays[0] != 7*time.Second || s.delays[1] < 100*time.Millisecond || s.delays[1] > 200*time.Millisecond {
			t.Fatalf("waits %v: want Retry-After's 7s, then a jittered back-off in [100ms, 200ms]", s.delays)
		}
		if len(events) != 2 || events[0].Kind != "retry" || events[0].Status != 429 || events[0].Delay != 7*time.Second ||
			events[1].Status != 503 || events[1].Attempt != 2 {
			t.Fatalf("events on the stream %+v", events)
		}
	})
}

func TestTransport_RetriesResetBeforeFirstByte(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSetup(t, resilience.Options{}, func(n int, w http.ResponseWriter) {
			if n == 0 {
				hangUp(t, w)
				return
			}
			writeSSE(w, answer("after a reset"))
		})
		r, events := s.ask(t, "s1")
		if r.Failed || r.Text != "after a reset" || s.served.Load() != 2 {
			t.Fatalf("answer %+v after %d requests", r, s.served.Load())
		}
		if len(events) != 1 || events[0].Error == "" || events[0].Status != 0 {
			t.Fatalf("events %+v: want one retry for a connection error", events)
		}
	})
}

func TestTransport_MidStreamFailureIsNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSetup(t, resilience.Options{}, func(n int, w http.ResponseWriter) {
			full := answer("never whole")
			writeSSE(w, full[:len(full)/2])
			_ = http.NewResponseController(w).Flush()
			hangUp(t, w)
		})
		r, events := s.ask(t, "s1")
		if !r.Failed || s.served.Load() != 1 || len(events) != 0 {
			t.Fatalf("failed %v (%s) after %d requests, events %+v: want ERROR after one request", r.Failed, r.Error, s.served.Load(), events)
		}
	})
}

func TestTransport_GivesUpAfterMaxRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSetup(t, resilience.Options{MaxRetries: 2}, func(n int, w http.ResponseWriter) {
			anthropictest.WriteError(w, http.StatusInternalServerError, "api_error", "down")
		})
		r, events := s.ask(t, "s1")
		if !r.Failed || !strings.Contains(r.Error, "HTTP 500") || s.served.Load() != 3 || len(events) != 2 {
			t.Fatalf("failed %v (%s) after %d requests with %d retries", r.Failed, r.Error, s.served.Load(), len(events))
		}
	})
}

// TestTransport_ConcurrencyLimitAcrossAgents: 200 adapters (one per
// agent) share one Model, so one transport with a limit of 4. The server
// holds each request until the test lets it go; never more than 4 are in
// flight, and 4 are, while the others report their wait in line. It runs
// in a synctest bubble (see newSetup).
func TestTransport_ConcurrencyLimitAcrossAgents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const agents, limit = 200, 4
		var inFlight, most, queued atomic.Int32
		arrived := make(chan struct{}, agents)
		proceed := make(chan struct{})
		var tr *resilience.Transport
		var m *anthropic.Model
		rg := modeltest.NewMemRig(t, func(_ int, w http.ResponseWriter, _ *http.Request, _ map[string]json.RawMessage) {
			n := inFlight.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			arrived <- struct{}{}
			<-proceed
			inFlight.Add(-1) // before the body ends: the client's slot is freed after
			writeSSE(w, answer("ok"))
		}, func(url string, client *http.Client) actors.Spec {
			var err error
			tr, err = resilience.New(client.Transport, &resilience.Options{MaxConcurrent: limit,
				OnEvent: func(ev resilience.Event) {
					if ev.Kind == "queued" {
						queued.Add(1)
					}
				}})
			if err != nil {
				t.Fatal(err)
			}
			m = modeltest.Must(anthropic.New(&anthropic.Options{BaseURL: url, Model: "claude-test", HTTPClient: tr.Client(), MaxRetries: anthropic.NoRetries}))(t)
			return m.Spec("rig")
		})
		rt := modeltest.Runtime(t)
		conns := make([]*actors.Conn, agents)
		for i := range conns {
			var err error
			if conns[i], err = rt.Start(m.Spec(fmt.Sprintf("agent-%d", i))); err != nil {
				t.Fatal(err)
			}
			req := &models.Request{StreamID: "s", Params: []models.Param{{Name: models.ParamMessages, Value: json.RawMessage(`[{"role":"user","content":"hi"}]`)}}}
			if err := conns[i].SendAll(req.Frames()...); err != nil {
				t.Fatal(err)
			}
		}
		for range limit {
			<-arrived // the first four are in
		}
		// The bubble's clock moves once every goroutine waits: the other
		// requests wait in line for the second it moves.
		time.Sleep(time.Second)
		if got := tr.InFlight(); got != limit {
			t.Fatalf("transport has %d in flight, want %d", got, limit)
		}
		go func() {
			for range agents {
				proceed <- struct{}{}
			}
		}()
		for i, c := range conns {
			frames, err := c.RecvStream(rg.Ctx, "s")
			if err != nil {
				t.Fatalf("agent %d: %v", i, err)
			}
			if r, err := models.ReadResponse(frames); err != nil || r.Failed || r.Text != "ok" {
				t.Fatalf("agent %d: %+v (%v)", i, r, err)
			}
		}
		if m := most.Load(); m != limit {
			t.Fatalf("at most %d requests were in flight at the server, want exactly %d", m, limit)
		}
		if n := queued.Load(); n != agents-limit {
			t.Fatalf("%d requests reported waiting for a slot, want the %d past the first %d", n, agents-limit, limit)
		}
	})
}
