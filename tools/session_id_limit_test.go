package tools_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// TestSessionOptions_IDFitsEveryStore: a session whose ID leaves its
// record of calls held for approval (ID + ApprovalStoreSuffix) within
// durability.MaxNameLen runs to its answer; NewLoop, and MoveSession
// to it, refuse an ID one byte longer up front, with a short error wrapping
// durability.ErrInvalidName that says its length, the limit and why.
func TestSessionOptions_IDFitsEveryStore(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	model := scripted.MustNew(scripted.Script{Turns: []scripted.Turn{{Text: "Fits."}}}, nil)
	longest := durability.MaxNameLen - len(tools.ApprovalStoreSuffix)
	if tools.MaxSessionIDLen != longest {
		t.Errorf("MaxSessionIDLen is %d, want %d", tools.MaxSessionIDLen, longest)
	}

	id := strings.Repeat("s", longest)
	loop, err := tools.NewLoop(model.Spec("model"), &tools.LoopOptions{RouterOptions: tools.RouterOptions{Name: "loop"},
		Session: &tools.SessionOptions{ID: id, Store: store}})
	if err != nil {
		t.Fatalf("an id of %d bytes: %v", len(id), err)
	}
	conn := start(t, newRuntime(t), loop)
	send(t, conn, messages.RawParam("a", models.ParamMessages, json.RawMessage(`[{"role":"user","content":"hi"}]`)), messages.End("a"))
	got, err := conn.RecvStream(testCtx(t), "a")
	if err != nil || !strings.Contains(strings.Join(lines(got), "\n"), `text="Fits."`) {
		t.Fatalf("the session of an id of %d bytes: %q, %v", len(id), lines(got), err)
	}

	long := id + "s"
	_, newErr := tools.NewLoop(model.Spec("model"), &tools.LoopOptions{Session: &tools.SessionOptions{ID: long, Store: store}})
	_, moveErr := tools.MoveSession(testCtx(t), store, id, long)
	for what, err := range map[string]error{"NewLoop": newErr, "MoveSession to it": moveErr} {
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if !errors.Is(err, durability.ErrInvalidName) || len(msg) > 600 {
			t.Fatalf("%s of an id of %d bytes: %v, want durability.ErrInvalidName, short", what, len(long), err)
		}
		for _, says := range []string{strconv.Itoa(len(long)), strconv.Itoa(durability.MaxNameLen), strconv.Itoa(longest), tools.ApprovalStoreSuffix} {
			if !strings.Contains(msg, says) {
				t.Errorf("%s of an id of %d bytes: %q does not say %s", what, len(long), msg, says)
			}
		}
	}
}
