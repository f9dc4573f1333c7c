package inspect_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/inspect"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models/scripted"
)

// endCounter counts the ENDs an adapter emits, under mu.
type endCounter struct {
	mu   *sync.Mutex
	ends *int
}

func (o endCounter) Received(actors.Context, any) bool { return true }
func (o endCounter) Handled()                          {}
func (o endCounter) Ended(error)                       {}
func (o endCounter) Emitted(f *messages.Frame) bool {
	if f.GetType() == messages.FrameType_END {
		o.mu.Lock()
		*o.ends++
		o.mu.Unlock()
	}
	return true
}

// TestModel_ObservesWithoutDecorating: the inspector sees an adapter's
// conversation without decorating its Logic (the adapter's own Logic
// runs, as without the inspector), and an observer the adapter's spec
// already has still sees what it emits.
func TestModel_ObservesWithoutDecorating(t *testing.T) {
	var mu sync.Mutex
	ends := 0
	m := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
		{Text: "Let me echo.", ToolCalls: []scripted.ToolCall{{ID: "call_1", Name: "echo", Arguments: `{"x":7}`}}},
		{Text: "done"},
	}}, nil)
	model := m.Spec("model")
	model.Observe = func() actors.FrameObserver { return endCounter{mu: &mu, ends: &ends} }

	in, err := inspect.New(actorstest.NewRuntime(t, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if got, want := fmt.Sprintf("%T", in.Model(model).New()), fmt.Sprintf("%T", model.New()); got != want {
		t.Errorf("the inspected adapter's Logic is a %s, want the adapter's own %s", got, want)
	}

	r := newRig(t, nil, model)
	if frames := r.converse(t, "s1", "echo seven"); finalText(frames) != "done" {
		t.Fatalf("conversation: %v", frames)
	}
	if s := r.state(t, "s1").Session; s == nil || s.Answer != "done" {
		t.Fatalf("session detail %+v, want the answer shown", s)
	}
	mu.Lock()
	defer mu.Unlock()
	if ends != 2 {
		t.Errorf("the adapter's own observer saw %d ENDs, want 2 (one a response)", ends)
	}
}
