package tools_test

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

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
		packed, err := anypb.New(&messages.LoopSession{SessionId: c.from, FirstRequest: []byte(`[]`), Text: "kept"})
		if err != nil {
			t.Fatal(err)
		}
		data, err := proto.Marshal(packed)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.PersistSnapshot(context.Background(), c.from, 1, data); err != nil {
			t.Fatal(err)
		}
		moved, err := tools.MoveSession(context.Background(), store, c.from, c.to)
		if err == nil || moved {
			t.Errorf("MoveSession(%q, %q): %v, %v; want a refusal", c.from, c.to, moved, err)
		}
		if st, ok, err := tools.ReadSession(context.Background(), store, c.from); err != nil || !ok || st.GetText() != "kept" {
			t.Errorf("session %q after the refused move: %v, %v, %v", c.from, st, ok, err)
		}
	}
}
