package tools_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/modeltest"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// TestSession_ThinkingSurvivesResume: the model thinks, then calls a tool;
// the process stops while the call runs. The resumed session's follow-up
// sends the thinking back with the assistant turn, as a model that thinks
// (Anthropic's extended thinking) requires.
func TestSession_ThinkingSurvivesResume(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	const thinking = `[{"type":"thinking","thinking":"I should call slow.","signature":"EqQBCgIYAhIM"}]`
	const first = `[{"role":"user","content":"go"}]`
	running := make(chan struct{}, 1)
	slow, err := tools.New(tools.Definition{Name: "slow", Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
		running <- struct{}{}
		<-ctx.Done() // until the process stops
		return nil, ctx.Err()
	}})
	if err != nil {
		t.Fatal(err)
	}
	session := &tools.SessionOptions{ID: "s", Store: store}

	// The first process: the call is running when it stops.
	model1 := scripted.MustNew(scripted.Script{Turns: []scripted.Turn{
		{Thinking: json.RawMessage(thinking), ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "slow"}}},
	}}, nil)
	loop1, err := tools.NewLoop(model1.Spec("model"), &tools.LoopOptions{
		RouterOptions: tools.RouterOptions{Name: "loop", Tools: []*tools.Tool{slow}}, Session: session})
	if err != nil {
		t.Fatal(err)
	}
	rt1 := newRuntime(t)
	conn1 := start(t, rt1, loop1)
	send(t, conn1, messages.RawParam("a", models.ParamMessages, json.RawMessage(first)), messages.End("a"))
	<-running // the step before the call ran is persisted
	if err := rt1.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}

	// The second process resumes: the call was interrupted, the model is
	// told, with its thinking in front of its call.
	model2 := scripted.MustNew(scripted.Script{Turns: []scripted.Turn{{Text: "Gave up on slow."}}}, nil)
	loop2, err := tools.NewLoop(model2.Spec("model"), &tools.LoopOptions{
		RouterOptions: tools.RouterOptions{Name: "loop", Tools: []*tools.Tool{slow}}, Session: session})
	if err != nil {
		t.Fatal(err)
	}
	conn2 := start(t, newRuntime(t), loop2)
	send(t, conn2, messages.RawParam("b", models.ParamMessages, json.RawMessage(first)), messages.End("b"))
	got, err := conn2.RecvStream(testCtx(t), "b")
	if err != nil {
		t.Fatal(err)
	}
	if out := strings.Join(lines(got), "\n"); !strings.Contains(out, "Gave up on slow.") {
		t.Fatalf("resumed session did not reach its answer:\n%s", out)
	}
	reqs := model2.Requests()
	if len(reqs) != 1 {
		t.Fatalf("model got %d requests, want 1", len(reqs))
	}
	var msgs []struct {
		Role     string          `json:"role"`
		Thinking json.RawMessage `json:"thinking_blocks"`
	}
	for _, p := range reqs[0].Request.Params {
		if p.Name == models.ParamMessages {
			if err := json.Unmarshal(p.Value, &msgs); err != nil {
				t.Fatal(err)
			}
		}
	}
	var assistant json.RawMessage
	for _, m := range msgs {
		if m.Role == "assistant" {
			assistant = m.Thinking
		}
	}
	if !modeltest.JSONEqual(assistant, []byte(thinking)) {
		t.Fatalf("follow-up's assistant turn carries thinking %s, want %s (messages %+v)", assistant, thinking, msgs)
	}
}
