//go:build linux

package workspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	j := journalOf(t, fx.ws,
		fmt.Sprintf(`{"write":{"call_id":"c1","path":"sec/key.txt","existed":true,"prev":%q,"perm":384,"new_hash":%q}}`,
			"U0VDUkVU", hashOf([]byte("known")))) // prev: "SECRET"
	undoRefusedWhileRunning(t, fx, j, "sec/key.txt")
	restored, err := j.Undo(t.Context(), "s", "")
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

// An undo is judged by where its restore lands, as a write is: a file
// the session wrote in pub, which a command has since made a link to
// sec, where a path hidden from commands is, is restored (or removed)
// in sec, so not while a command runs; and the undo is refused before
// it restores anything.
func TestUndo_ThroughALinkedFolderJudgedWhereItLands(t *testing.T) {
	for _, existed := range []bool{false, true} {
		t.Run(fmt.Sprintf("existed=%v", existed), func(t *testing.T) {
			fx, in := hidingFixture(t, "sec/key.txt")
			mustDo(t, os.Mkdir(in("sec"), 0o755))
			mustDo(t, os.WriteFile(in("sec/key.txt"), []byte("X"), 0o600))
			mustDo(t, os.Symlink("sec", in("pub")))
			mustDo(t, os.WriteFile(in("a.txt"), []byte("A"), 0o644))
			first := fmt.Sprintf(`{"write":{"call_id":"c1","path":"pub/key.txt","existed":false,"new_hash":%q}}`, hashOf([]byte("X")))
			if existed {
				first = fmt.Sprintf(`{"write":{"call_id":"c1","path":"pub/key.txt","existed":true,"prev":"T0xE","perm":384,"new_hash":%q}}`,
					hashOf([]byte("X"))) // prev: "OLD"
			}
			j := journalOf(t, fx.ws, first)
			undoRefusedWhileRunning(t, fx, j, "pub/key.txt (pub -> sec)")
			if got := readFile(t, in("sec/key.txt")); got != "X" {
				t.Errorf("sec/key.txt after the refused undo: %q, want it as it was", got)
			}
			restored, err := j.Undo(t.Context(), "s", "")
			if err != nil || len(restored) != 2 {
				t.Fatalf("undo with no command running: %+v, %v", restored, err)
			}
			want := "<none>"
			if existed {
				want = "OLD"
			}
			if got := content(t, in("sec/key.txt")); got != want {
				t.Errorf("sec/key.txt after the undo: %q, want %q", got, want)
			}
		})
	}
}

func content(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "<none>"
	}
	mustDo(t, err)
	return string(b)
}

// journalOf returns a journal of ws in a memstore holding, as session
// "s", the write event first and then a write of call c2 that created
// a.txt, holding "A".
func journalOf(t *testing.T, ws *Workspace, first string) *Journal {
	t.Helper()
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	j, err := NewJournal(ws, store, nil)
	mustDo(t, err)
	for i, e := range []string{first,
		fmt.Sprintf(`{"write":{"call_id":"c2","path":"a.txt","existed":false,"new_hash":%q}}`, hashOf([]byte("A"))),
	} {
		mustDo(t, store.PersistEvent(t.Context(), JournalKey("", "s"), uint64(i), []byte(e)))
	}
	return j
}

// undoRefusedWhileRunning fails t unless an undo of session "s" of j,
// as while a command runs, is refused (ReasonHiddenInUse) having
// restored nothing: a.txt, the later write, is as it was.
func undoRefusedWhileRunning(t *testing.T, fx *fixture, j *Journal, hidden string) {
	t.Helper()
	mustDo(t, fx.ws.commandBegins(t.Context()))
	restored, err := j.Undo(t.Context(), "s", "")
	fx.ws.commandEnds()
	var re *refusedError
	if !errors.As(err, &re) || re.reason != ReasonHiddenInUse || len(restored) != 0 {
		t.Errorf("undo of %s and a.txt while a command runs: %+v, %v; want refused (%s), nothing restored",
			hidden, restored, err, ReasonHiddenInUse)
	}
	if _, err := os.Stat(filepath.Join(fx.ws.dir, "a.txt")); err != nil {
		t.Errorf("a.txt after the refused undo: %v, want it as it was", err)
	}
}
