package tools_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/boltstore"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
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
		send(t, conn, messages.RawParam(stream, models.ParamMessages, json.RawMessage(msgs)), messages.End(stream))
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
		"no id":             {Store: store},
		"no store":          {ID: "x"},
		"negative buffer":   {ID: "x", Store: store, BufferBytes: -1},
		"negative interval": {ID: "x", Store: store, SnapshotEvery: -1},
	} {
		if _, err := tools.NewLoop(model.Spec("m"), &tools.LoopOptions{Session: s}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestSession_ResumeAfterModelFailure: when the model fails but the loop
// survives, sending the first request again to the same loop resumes the
// session from its last persisted step, as a fresh loop reading the store
// would: the side-effecting call that completed is not run again, and the
// conversation goes on to its final answer.
func TestSession_ResumeAfterModelFailure(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	writes := make(chan string, 8) // the handler runs off the test goroutine
	write, err := tools.New(tools.Definition{Name: "write_file", Handler: func(_ context.Context, args json.RawMessage) (any, error) {
		writes <- string(args)
		return map[string]bool{"ok": true}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	// Turns are picked by conversation, as a model answers what it reads:
	// a conversation started over would get the write again.
	model := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "write_file", Arguments: `{"path":"a.txt"}`}}},
		{Text: "Written."},
	}}, nil)
	loop, err := tools.NewLoop(flakyOnce(model.Spec("model"), 1, "model down"), &tools.LoopOptions{
		RouterOptions: tools.RouterOptions{Name: "loop", Tools: []*tools.Tool{write}},
		Session:       &tools.SessionOptions{ID: "s", Store: store},
	})
	if err != nil {
		t.Fatal(err)
	}
	conn := start(t, newRuntime(t), loop)
	const first = `[{"role":"user","content":"write a.txt"}]`
	ask := func(stream string) string {
		t.Helper()
		send(t, conn, messages.RawParam(stream, models.ParamMessages, json.RawMessage(first)), messages.End(stream))
		got, err := conn.RecvStream(testCtx(t), stream)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(lines(got), "\n")
	}

	got := ask("a")
	if !strings.Contains(got, "TOOL_RESULT stream=a") || !strings.Contains(got, `ERROR stream=a text="model down"`) {
		t.Fatalf("first attempt: want the call's result, then the model's failure; got\n%s", got)
	}
	got = ask("b")
	if !strings.Contains(got, `META stream=b name=session payload={"event":"resumed"`) || !strings.Contains(got, `TEXT stream=b text="Written."`) ||
		!strings.HasSuffix(got, "END stream=b") || strings.Contains(got, "ERROR") {
		t.Errorf("resent first request: want the session resumed to its final answer; got\n%s", got)
	}
	if n := len(writes); n != 1 {
		t.Errorf("write_file ran %d times, want once", n)
	}
}

// flakyOnce wraps a model so that its n-th response (from 0, counted over
// all streams) is replaced by ERROR(reason) and END, once: the model's
// stream breaks while the loop around it stays up.
func flakyOnce(model actors.Spec, n int, reason string) actors.Spec {
	responses := 0 // only the wrapper's goroutine touches it
	return actors.Wrap("flaky", model, func() actors.Wrapped {
		return actors.Hooks{OnResponse: func(c actors.WrapperContext, f *messages.Frame) {
			if responses != n {
				if f.GetType() == messages.FrameType_END {
					responses++
				}
				c.ToOuter(f)
				return
			}
			if f.GetType() == messages.FrameType_END {
				responses++
				c.ToOuter(messages.Error(f.GetStreamId(), reason))
				c.ToOuter(f)
			}
		}}
	})
}

// TestDeleteSession: an ended session, once deleted, is gone from the
// store (ReadSession finds nothing, no event or snapshot is left), and the
// same id starts a new conversation that asks the model again.
func TestDeleteSession(t *testing.T) { forEachStore(t, testDeleteSession) }

// forEachStore runs test on a session store of each kind: in memory and
// bbolt.
func forEachStore(t *testing.T, test func(t *testing.T, store durability.Store)) {
	t.Run("memstore", func(t *testing.T) {
		store := memstore.New(nil)
		t.Cleanup(func() { store.Close() })
		test(t, store)
	})
	t.Run("bbolt", func(t *testing.T) {
		store, err := boltstore.Open(filepath.Join(t.TempDir(), "sessions.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		test(t, store)
	})
}

func testDeleteSession(t *testing.T, store durability.Store) {
	model := scripted.MustNew(scripted.Script{Turns: []scripted.Turn{{Text: "One."}, {Text: "Two."}}}, nil)
	rt := newRuntime(t)
	ask := func(name string) string {
		t.Helper()
		loop, err := tools.NewLoop(model.Spec("model"), &tools.LoopOptions{RouterOptions: tools.RouterOptions{Name: name},
			Session: &tools.SessionOptions{ID: "s", Store: store}})
		if err != nil {
			t.Fatal(err)
		}
		conn := start(t, rt, loop)
		send(t, conn, messages.RawParam("a", models.ParamMessages, json.RawMessage(`[{"role":"user","content":"hi"}]`)), messages.End("a"))
		got, err := conn.RecvStream(testCtx(t), "a")
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(lines(got), "\n")
	}
	if got := ask("loop-1"); !strings.Contains(got, `text="One."`) {
		t.Fatalf("first run: %s", got)
	}
	ctx := testCtx(t)
	if _, ok, err := tools.ReadSession(ctx, store, "s"); err != nil || !ok {
		t.Fatalf("ReadSession before delete: %v, %v", ok, err)
	}
	if err := tools.DeleteSession(ctx, store, "s"); err != nil {
		t.Fatal(err)
	}
	if st, ok, err := tools.ReadSession(ctx, store, "s"); err != nil || ok {
		t.Fatalf("ReadSession after delete: %v, %v, %v", st, ok, err)
	}
	left := 0
	if err := store.GetEvents(ctx, "s", 0, 0, func(uint64, []byte) error { left++; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := store.GetSnapshot(ctx, "s"); err != nil || ok || left != 0 {
		t.Fatalf("after delete: %d events, snapshot %v (%v)", left, ok, err)
	}
	if got := ask("loop-2"); !strings.Contains(got, `text="Two."`) {
		t.Errorf("the deleted session's id did not start over: %s", got)
	}
}
