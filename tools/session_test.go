package tools_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// TestSession_EndedAndRefused: a session that ended answers its first
// request again with the stored final answer without asking the model; a
// different first request under the same id is refused.
func TestSession_EndedAndRefused(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	runs := 0
	tool, err := tools.New(tools.Definition{Name: "bump", Handler: func(context.Context, json.RawMessage) (any, error) {
		runs++ // handlers of one loop run one at a time here: one call
		return map[string]int{"runs": runs}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	model := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "bump"}}},
		{Text: "Bumped."},
	}}, nil)
	rt := newRuntime(t)
	request := func(name, stream, msgs string) []string {
		t.Helper()
		loop, err := tools.NewLoop(model.Spec("model"), &tools.LoopOptions{
			RouterOptions: tools.RouterOptions{Name: name, Tools: []*tools.Tool{tool}},
			Session:       &tools.SessionOptions{ID: "s", Store: store},
		})
		if err != nil {
			t.Fatal(err)
		}
		conn := start(t, rt, loop)
		send(t, conn, messages.RawParam(stream, tools.ParamMessages, json.RawMessage(msgs)), messages.End(stream))
		got, err := conn.RecvStream(testCtx(t), stream)
		if err != nil {
			t.Fatal(err)
		}
		return lines(got)
	}
	const first = `[{"role":"user","content":"bump it"}]`
	got := request("loop-1", "a", first)
	if !strings.Contains(strings.Join(got, "\n"), `TEXT stream=a text="Bumped."`) {
		t.Fatalf("first run: %q", got)
	}
	served := model.Served()

	got = request("loop-2", "b", first)
	want := []string{`TEXT stream=b text="Bumped."`, "END stream=b"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("ended session asked again: %q, want %q", got, want)
	}
	if model.Served() != served || runs != 1 {
		t.Errorf("the ended session asked the model (%d → %d) or ran the tool (%d runs)", served, model.Served(), runs)
	}

	got = request("loop-3", "c", `[{"role":"user","content":"something else"}]`)
	if len(got) != 2 || !strings.HasPrefix(got[0], "ERROR stream=c") || !strings.Contains(got[0], "different request") {
		t.Errorf("a different first request got %q, want ERROR and END", got)
	}
}

func TestSessionOptions_Validated(t *testing.T) {
	store := memstore.New(nil)
	defer store.Close()
	model := scripted.MustNew(scripted.Script{Turns: []scripted.Turn{{Text: "x"}}}, nil)
	for name, s := range map[string]*tools.SessionOptions{
		"no id":    {Store: store},
		"no store": {ID: "x"},
	} {
		if _, err := tools.NewLoop(model.Spec("m"), &tools.LoopOptions{Session: s}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
