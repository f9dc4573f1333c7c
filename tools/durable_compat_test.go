package tools_test

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
)

// TestDurableRouter_OlderReleaseCannotReplayClosedStreams: what
// DurabilityOptions says a downgrade sees. A release that knows the
// router's events but RouterStreamClosed and RouterStreamOpened (a
// resolver of those types alone) fails its recovery on the first of them
// with a decode StoreError, and replays nothing past it.
func TestDurableRouter_OlderReleaseCannotReplayClosedStreams(t *testing.T) {
	store := memstore.New(nil)
	defer store.Close()
	current, err := durability.NewProvider(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	current.PersistEvents("router", 0, []proto.Message{
		&messages.RouterCallStarted{StreamId: "s", ToolCallId: "call_a", Name: "record"},
		&messages.RouterStreamClosed{StreamId: "s", ClosedAt: 42},
		&messages.RouterCallCompleted{StreamId: "s", ToolCallId: "call_a"},
	})

	older := new(protoregistry.Types)
	for _, m := range []proto.Message{&messages.RouterState{}, &messages.RouterCallStarted{}, &messages.RouterChunkAppended{},
		&messages.RouterCallCompleted{}, &messages.RouterStreamEnded{}, &messages.RouterRestored{}} {
		if err := older.RegisterMessage(m.ProtoReflect().Type()); err != nil {
			t.Fatal(err)
		}
	}
	old, err := durability.NewProvider(store, &durability.ProviderOptions{Resolver: older})
	if err != nil {
		t.Fatal(err)
	}
	var replayed []any
	func() {
		defer func() {
			var se *durability.StoreError
			if err, _ := recover().(error); !errors.As(err, &se) || se.Op != durability.OpDecode {
				t.Errorf("the older release's replay failed with %v, want a StoreError of Op %s", err, durability.OpDecode)
			}
		}()
		old.GetEvents("router", 0, 0, func(e any) { replayed = append(replayed, e) })
	}()
	if len(replayed) != 1 {
		t.Errorf("the older release replayed %d events, want the one before RouterStreamClosed", len(replayed))
	}

}
