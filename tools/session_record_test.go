package tools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// TestSession_ResultMarks: a session keeps which results of its rounds
// were errors, and their failure kinds, beside its messages, which stay
// the follow-up's conversation byte for byte; a moved session keeps them.
func TestSession_ResultMarks(t *testing.T) { forEachStore(t, testSessionResultMarks) }

func testSessionResultMarks(t *testing.T, store durability.Store) {
	fail := tools.MustNew(tools.Definition{Name: "fail", Handler: func(context.Context, json.RawMessage) (any, error) {
		return nil, errors.New("no luck")
	}})
	ok := tools.MustNew(tools.Definition{Name: "ok", Handler: func(context.Context, json.RawMessage) (any, error) {
		return map[string]bool{"ok": true}, nil
	}})
	model := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "ok"}, {ID: "c2", Name: "fail"}}},
		{ToolCalls: []scripted.ToolCall{{ID: "c3", Name: "fail"}}},
		{Text: "Done."},
	}}, nil)
	loop, err := tools.NewLoop(model.Spec("model"), &tools.LoopOptions{
		RouterOptions: tools.RouterOptions{Name: "loop", Tools: []*tools.Tool{fail, ok}},
		Session:       &tools.SessionOptions{ID: "s", Store: store, SnapshotEvery: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	conn := start(t, newRuntime(t), loop)
	send(t, conn, messages.RawParam("a", models.ParamMessages, json.RawMessage(`[{"role":"user","content":"try"}]`)), messages.End("a"))
	if _, err := conn.RecvStream(testCtx(t), "a"); err != nil {
		t.Fatal(err)
	}

	st, found, err := tools.ReadSession(testCtx(t), store, "s")
	if err != nil || !found {
		t.Fatalf("ReadSession: %v, %v", found, err)
	}
	// user, assistant c1 c2, tool c1, tool c2, assistant c3, tool c3
	want := []*messages.ResultMark{
		{Message: 3, ToolCallId: "c2", IsError: true, FailureKind: string(tools.FailureHandler)},
		{Message: 5, ToolCallId: "c3", IsError: true, FailureKind: string(tools.FailureHandler)},
	}
	wantMarks(t, "stored session", st, want)
	for _, mk := range want {
		var m models.Message
		if err := json.Unmarshal(st.GetMessages()[mk.GetMessage()], &m); err != nil || m.Role != models.RoleTool || m.ToolCallID != mk.GetToolCallId() {
			t.Errorf("message %d: %+v, %v; want the tool message of %s", mk.GetMessage(), m, err, mk.GetToolCallId())
		}
	}
	// The last request's messages are the stored ones: the marks are
	// kept apart from them.
	reqs := model.Requests()
	sent, _ := reqs[len(reqs)-1].Request.Param(models.ParamMessages)
	if stored := append(append([]byte("["), bytes.Join(st.GetMessages(), []byte(","))...), ']'); !bytes.Equal(sent, stored) {
		t.Errorf("the last request's messages\n%s\nthe stored ones\n%s", sent, stored)
	}

	if moved, err := tools.MoveSession(testCtx(t), store, "s", "moved"); err != nil || !moved {
		t.Fatalf("MoveSession: %v, %v", moved, err)
	}
	there, found, err := tools.ReadSession(testCtx(t), store, "moved")
	if err != nil || !found {
		t.Fatalf("ReadSession of the moved session: %v, %v", found, err)
	}
	wantMarks(t, "moved session", there, want)
}

func wantMarks(t *testing.T, what string, st *messages.LoopSession, want []*messages.ResultMark) {
	t.Helper()
	got := st.GetResultMarks()
	if len(got) != len(want) {
		t.Fatalf("%s: result marks %v, want %v", what, got, want)
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("%s: result mark %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}
