package agent

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// TestCalls_NoEntryLeft: the agent's table of the handlers its calls run
// (Agent.calls, a callTable) holds each from its start to its return, and nothing
// once they have returned: a handler that panics, one that outlives its
// call's timeout (its entry kept until it returns, after the call was
// answered), and one that returns, each counted once.
func TestCalls_NoEntryLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		release := make(chan struct{})
		tool := func(name string, timeout time.Duration, h func() (any, error)) *tools.Tool {
			return tools.MustNew(tools.Definition{Name: name, Timeout: timeout,
				Handler: func(context.Context, json.RawMessage) (any, error) { return h() }})
		}
		m, err := scripted.New(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
			{ToolCalls: []scripted.ToolCall{
				{ID: "c1", Name: "boom", Arguments: `{}`},
				{ID: "c2", Name: "slow", Arguments: `{}`},
				{ID: "c3", Name: "quick", Arguments: `{}`},
			}},
			{Text: "Done."},
		}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		a, err := New(rt, m.Spec("model"), &Options{Name: "calls", Tools: []*tools.Tool{
			tool("boom", 0, func() (any, error) { panic("boom") }),
			tool("slow", time.Second, func() (any, error) { <-release; return nil, nil }), // ignores its ctx
			tool("quick", 0, func() (any, error) { return nil, nil }),
		}})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := a.Close(context.Background()); err != nil {
				t.Error(err)
			}
		}()
		ans, err := a.Run(context.Background(), "s", []models.Message{models.UserMessage("Go.")})
		if err != nil || ans.Text != "Done." || ans.FailedCalls() != 2 {
			t.Fatalf("Run: %+v, %v; want its answer, the panic and the timeout failed calls", ans, err)
		}
		synctest.Wait()
		running, seq := len(a.calls.running(nil)), a.calls.seq.Load()
		if running != 1 || seq != 3 {
			t.Errorf("after the Run: %d handler(s) in the table of %d begun, want the slow one of 3", running, seq)
		}
		close(release)
		synctest.Wait()
		running, seq = len(a.calls.running(nil)), a.calls.seq.Load()
		if running != 0 || seq != 3 {
			t.Errorf("once every handler returned: %d handler(s) in the table of %d begun, want none of 3", running, seq)
		}
	})
}

// TestCallTable_PastItsSlots: a table keeps every handler running, more
// at once than it has slots included, each with its session and number,
// and forgets each as it returns, in any order.
func TestCallTable_PastItsSlots(t *testing.T) {
	const n = 3 * callSlots
	calls := newCallTable()
	ctxs := handlerContexts(t, actorstest.NewRuntime(t, nil), n)
	for _, ctx := range ctxs {
		calls.begin(ctx)
	}
	running := calls.running(nil)
	if len(running) != n {
		t.Fatalf("%d handlers kept of %d running", len(running), n)
	}
	seen := map[uint64]string{}
	for _, h := range running {
		seen[h.seq] = h.session
	}
	for i := range n {
		if want := "s" + strconv.Itoa(i); seen[uint64(i+1)] != want {
			t.Errorf("handler %d: session %q, want %q", i+1, seen[uint64(i+1)], want)
		}
	}
	for i := n - 1; i >= 0; i -= 2 { // every other one, from the last
		calls.end(ctxs[i])
	}
	if got := len(calls.running(nil)); got != n/2 {
		t.Errorf("%d handlers kept once half returned, want %d", got, n/2)
	}
	for i := 0; i < n; i += 2 {
		calls.end(ctxs[i])
	}
	if got := calls.running(nil); len(got) != 0 || calls.seq.Load() != n {
		t.Errorf("once all returned: %d kept, %d begun; want none of %d", len(got), calls.seq.Load(), n)
	}
}

// handlerContexts returns the ctxs a call runner on rt gave the handlers
// of n calls, each on a stream of session "s<i>" of its own, kept once
// they returned.
func handlerContexts(t testing.TB, rt *actors.Runtime, n int) []context.Context {
	t.Helper()
	got := make(chan context.Context, n)
	spec, err := tools.NewCallRunner(&tools.RouterOptions{Tools: []*tools.Tool{tools.MustNew(tools.Definition{Name: "t",
		Handler: func(ctx context.Context, _ json.RawMessage) (any, error) { got <- ctx; return nil, nil }})}})
	if err != nil {
		t.Fatal(err)
	}
	mux, err := rt.StartMux(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer mux.Close(context.Background())
	ctxs := map[string]context.Context{}
	for i := range n {
		stream := StreamID("s"+strconv.Itoa(i), 1)
		s, err := mux.Open(stream)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(messages.ToolCall(stream, "c1", "t", json.RawMessage(`{}`))); err != nil {
			t.Fatal(err)
		}
		ctx := <-got
		call, _ := tools.CallFrom(ctx)
		ctxs[call.StreamID] = ctx
	}
	out := make([]context.Context, n)
	for i := range out {
		out[i] = ctxs[StreamID("s"+strconv.Itoa(i), 1)]
	}
	return out
}

// TestCallTable_HandlersSpreadOverSlots: the handlers running at once
// start from slots of their own (see home), their ctxs all of one type:
// a hash that read what the ctxs share (their type) would put them all
// in one slot, each begin and end then passing the slots taken before.
func TestCallTable_HandlersSpreadOverSlots(t *testing.T) {
	const n = 4 * callSlots
	ctxs := handlerContexts(t, actorstest.NewRuntime(t, nil), n)
	homes := map[uint64]int{}
	for _, ctx := range ctxs {
		h := home(ctx)
		if h >= callSlots {
			t.Fatalf("home %d, past the %d slots", h, callSlots)
		}
		if again := ctx; home(again) != h {
			t.Fatalf("the same ctx starts from slots %d and %d", h, home(again))
		}
		homes[h]++
	}
	// 64 handlers hashed at random leave 16 * (15/16)^64, about 0.3, of
	// the 16 slots unused on average: fewer than half of them used is a
	// hash that does not spread.
	if len(homes) < callSlots/2 {
		t.Errorf("%d handlers start from %d slot(s) of %d: %v", n, len(homes), callSlots, homes)
	}
}
