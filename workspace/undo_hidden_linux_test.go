//go:build linux

package workspace

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/polyweave/polyweave-go/durability/memstore"
)

// An undo that would restore a path hidden from commands while a
// command runs is refused before it restores anything (ReasonHiddenInUse),
// not midway: the visible files written after the hidden one stay as
// they are, and the whole undo is done once the command has ended.
func TestUndo_HiddenInUseRefusedBeforeAnything(t *testing.T) {
	fx, in := hidingFixture(t, "sec/key.txt")
	mustDo(t, os.Mkdir(in("sec"), 0o755))
	mustDo(t, os.WriteFile(in("sec/key.txt"), []byte("known"), 0o600))
	mustDo(t, os.WriteFile(in("a.txt"), []byte("A"), 0o644))
	store := memstore.New(nil)
	defer store.Close()
	j, err := NewJournal(fx.ws, store, nil)
	mustDo(t, err)
	ctx := t.Context()
	for i, e := range []string{
		fmt.Sprintf(`{"write":{"call_id":"c1","path":"sec/key.txt","existed":true,"prev":%q,"perm":384,"new_hash":%q}}`,
			"U0VDUkVU", hashOf([]byte("known"))), // prev: "SECRET"
		fmt.Sprintf(`{"write":{"call_id":"c2","path":"a.txt","existed":false,"new_hash":%q}}`, hashOf([]byte("A"))),
	} {
		mustDo(t, store.PersistEvent(ctx, JournalKey("", "s"), uint64(i), []byte(e)))
	}

	fx.ws.commandBegins() // as while a command runs
	restored, err := j.Undo(ctx, "s", "")
	fx.ws.commandEnds()
	var re *refusedError
	if !errors.As(err, &re) || re.reason != ReasonHiddenInUse || len(restored) != 0 {
		t.Errorf("undo of sec/key.txt and a.txt while a command runs: %+v, %v; want refused (%s), nothing restored", restored, err, ReasonHiddenInUse)
	}
	if _, err := os.Stat(in("a.txt")); err != nil {
		t.Errorf("a.txt after the refused undo: %v, want it as it was", err)
	}
	restored, err = j.Undo(ctx, "s", "")
	if err != nil || len(restored) != 2 {
		t.Fatalf("undo with no command running: %+v, %v", restored, err)
	}
	if got := readFile(t, in("sec/key.txt")); got != "SECRET" {
		t.Errorf("sec/key.txt after the undo: %q", got)
	}
	if _, err := os.Stat(in("a.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a.txt after the undo: %v, want it removed", err)
	}
}
