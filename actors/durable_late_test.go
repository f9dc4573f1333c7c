package actors_test

import (
	"slices"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
)

// TestDurable_LateEndAfterRestartReachesTheLogic: a persistent duplex
// recovers its calls, so the frames its caller sends after a restart on
// a stream open at it (the call's END here) are the rest of a call it
// may resume: its next incarnation gets them, unlike a plain duplex's.
func TestDurable_LateEndAfterRestartReachesTheLogic(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	provider, err := durability.NewProvider(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	rt := newRuntime(t, nil)
	started := make(chan struct{}, 2)
	conn, err := rt.Start(actors.Spec{Name: "d", Persistence: provider, New: func() actors.Logic {
		return actors.LogicFunc(func(c actors.Context, msg any) {
			switch m := msg.(type) {
			case actors.Started:
				started <- struct{}{}
			case *messages.Frame:
				switch {
				case m.GetText() == "boom":
					panic("boom")
				case m.GetType() == messages.FrameType_END:
					c.Emit(messages.Text(m.GetStreamId(), "served"))
					c.Emit(messages.End(m.GetStreamId()))
				}
			}
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	ctx := testCtx(t)
	if err := conn.SendAll(messages.Text("a", "hi"), messages.Text("b", "boom")); err != nil {
		t.Fatal(err)
	}
	<-started // the next incarnation
	if err := conn.Send(messages.End("a")); err != nil {
		t.Fatal(err)
	}
	got, err := conn.RecvStream(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if got, err = conn.RecvStream(ctx, "a"); err != nil {
		t.Fatalf("stream a after the restart's ERROR and END: %v", err)
	}
	var names []string
	for _, f := range got {
		names = append(names, f.GetType().String())
	}
	if want := []string{"TEXT", "END"}; !slices.Equal(names, want) {
		t.Errorf("the END of a call open at the restart: got %q, want %q (the Logic's answer)", names, want)
	}
}
