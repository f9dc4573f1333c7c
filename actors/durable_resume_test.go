package actors

import (
	"errors"
	"slices"
	"testing"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
)

// TestShell_ResumedPersistentDuplexAnswersFailedCallOnce: a persistent
// duplex fails on a call and its supervisor resumes it. As a plain
// duplex, it answers the call once, with the Resume's ERROR (kind
// FailedKind) and END: the rest of the call's frames, up to its
// caller's END, are dropped, and what its Logic emits on the call is
// too; the next call is served. Its frames take protoactor's invocation
// (no direct hand-over), the path this test covers.
func TestShell_ResumedPersistentDuplexAnswersFailedCallOnce(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	provider, err := durability.NewProvider(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	rt := startRuntimeWith(t, &RuntimeOptions{Supervision: resumeAll()})
	conn, err := rt.Start(Spec{Name: "d", Persistence: provider, New: func() Logic {
		var failed string
		return LogicFunc(func(c Context, msg any) {
			f, ok := msg.(*messages.Frame)
			if !ok || f.GetType() != messages.FrameType_TEXT {
				return
			}
			id := f.GetStreamId()
			switch f.GetText() {
			case "fail":
				failed = id
				c.Fail(errors.New("boom"))
			case "late":
				c.Emit(messages.Text(failed, "late answer"))
				c.Emit(messages.End(failed))
			}
			c.Emit(messages.Text(id, "served"))
			c.Emit(messages.End(id))
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.SendAll(messages.Text("f", "fail"), messages.Text("f", "more"), messages.End("f"),
		messages.Text("g", "late")); err != nil {
		t.Fatal(err)
	}
	got := recvUntil(t, conn, "g", "END")
	want := []string{"f:ERROR(boom)[" + FailedKind + "]", "f:END", "g:TEXT(served)", "g:END"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q: the failed call answered once", got, want)
	}
}
