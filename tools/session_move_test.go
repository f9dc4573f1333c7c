package tools_test

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// TestMoveSession_RefusesItsOwnHeldCallsRecord: a session moved onto
// the name of its own held-calls record (or that record's name onto the
// session's) would share a name with it (the move deleted the copy it
// had just written with the held calls of the source): the move is
// refused, and the session stays where it was.
func TestMoveSession_RefusesItsOwnHeldCallsRecord(t *testing.T) {
	for _, c := range []struct{ from, to string }{
		{"s", "s" + tools.ApprovalStoreSuffix},
		{"s" + tools.ApprovalStoreSuffix, "s"},
	} {
		store := memstore.New(nil)
		t.Cleanup(func() { store.Close() })
		putSession(t, store, &messages.LoopSession{SessionId: c.from, FirstRequest: []byte(`[]`), Text: "kept"})
		moved, err := tools.MoveSession(context.Background(), store, c.from, c.to)
		if err == nil || moved {
			t.Errorf("MoveSession(%q, %q): %v, %v; want a refusal", c.from, c.to, moved, err)
		}
		if st, ok, err := tools.ReadSession(context.Background(), store, c.from); err != nil || !ok || st.GetText() != "kept" {
			t.Errorf("session %q after the refused move: %v, %v, %v", c.from, st, ok, err)
		}
	}
}

// putSession stores st under its id as a loop would snapshot it.
func putSession(t *testing.T, store durability.Store, st *messages.LoopSession) {
	t.Helper()
	packed, err := anypb.New(st)
	if err != nil {
		t.Fatal(err)
	}
	data, err := proto.Marshal(packed)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.PersistSnapshot(context.Background(), st.GetSessionId(), 1, data); err != nil {
		t.Fatal(err)
	}
}

// TestMoveSession_SameOpeningIsNotTheSameSession: two conversations may
// begin with the same request. A target that holds another one is not
// taken for a copy a crashed move left (whose source MoveSession then
// deletes): the move fails with ErrSessionExists and both stay; a target
// that holds the source's conversation (the copy, or what a loop made of
// it since) completes the move.
func TestMoveSession_SameOpeningIsNotTheSameSession(t *testing.T) {
	first := []byte(`[{"role":"user","content":"Hello."}]`)
	said := func(text string) []byte { return []byte(`{"role":"assistant","content":"` + text + `"}`) }
	ended := func(id, text string) *messages.LoopSession {
		return &messages.LoopSession{SessionId: id, FirstRequest: first, Phase: messages.LoopPhase_LOOP_PHASE_DONE,
			Messages: [][]byte{first, said(text)}, Text: text, Iteration: 1, Steps: 2}
	}
	for _, c := range []struct {
		name  string
		there *messages.LoopSession
		moved bool
	}{
		{"another conversation", ended("to", "Hi, Bob."), false},
		{"the copy", ended("to", "Hi, Ada."), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := memstore.New(nil)
			t.Cleanup(func() { store.Close() })
			putSession(t, store, ended("from", "Hi, Ada."))
			putSession(t, store, c.there)
			moved, err := tools.MoveSession(context.Background(), store, "from", "to")
			if moved != c.moved || c.moved != (err == nil) || !c.moved && !errors.Is(err, tools.ErrSessionExists) {
				t.Fatalf("MoveSession: %v, %v; want moved %v", moved, err, c.moved)
			}
			st, ok, err := tools.ReadSession(context.Background(), store, "from")
			if err != nil || ok == c.moved || ok && st.GetText() != "Hi, Ada." {
				t.Errorf("the source after the move: %v, %v, %v", st, ok, err)
			}
			if st, ok, err := tools.ReadSession(context.Background(), store, "to"); err != nil || !ok || st.GetText() != c.there.GetText() {
				t.Errorf("the target after the move: %v, %v, %v", st, ok, err)
			}
		})
	}
}
