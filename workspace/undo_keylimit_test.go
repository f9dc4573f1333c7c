package workspace_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/boltstore"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/workspace"
)

// TestNewJournal_NameLeavesNoRoomForSessions: a journal whose Name
// leaves no room for a session id within durability.MaxNameLen
// (counting the name as the key writes it, '/' as %2F) is opened, so
// that what a store holds under it (boltstore takes such keys, and an
// earlier version wrote them) is still listed and undone; it records
// no new session: the write is refused, not done, and on a store that
// refuses the key Changes fails, each with an error wrapping
// durability.ErrInvalidName that says the name's length, its length
// in a key, the limit and the longest name that fits. The longest name
// that leaves room for an id of one byte records as any other.
func TestNewJournal_NameLeavesNoRoomForSessions(t *testing.T) {
	ctx := undoCtx(t)
	mem := memstore.New(nil)
	defer mem.Close()
	bolt := boltJournalStore(t)
	dir := t.TempDir()
	ws, err := workspace.New(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	rt := actorstest.NewRuntime(t, nil)
	longest := durability.MaxNameLen - len(workspace.JournalKey("", "x")) + len(agent.DefaultName)
	j, err := workspace.NewJournal(ws, mem, &workspace.JournalOptions{Name: strings.Repeat("n", longest)})
	if err != nil {
		t.Fatalf("a name of %d bytes: %v", longest, err)
	}
	if got := startJournal(t, rt, j).call(agent.StreamID("x", 1), "c0", workspace.WriteFileToolName, `{"path":"x.txt","content":"X"}`); !strings.Contains(got, `"success":true`) {
		t.Fatalf("a write of session x, journal name of %d bytes: %s", longest, got)
	}
	for i, name := range []string{strings.Repeat("n", longest+1), strings.Repeat("a/", longest/4+1)} {
		inKey := len(workspace.JournalKey(name, "x")) - len(workspace.JournalKey("", "x")) + len(agent.DefaultName)
		what := fmt.Sprintf("a name of %d bytes (%d in a key)", len(name), inKey)
		if _, err := workspace.NewJournal(ws, mem, &workspace.JournalOptions{Name: name}); err != nil {
			t.Fatalf("NewJournal, %s: %v; want it opened, for what stores hold under it", what, err)
		}
		mj, err := workspace.NewJournal(ws, mem, &workspace.JournalOptions{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		_, err = mj.Changes(ctx, "x")
		invalidName(t, what+", Changes on memstore", err, len(name), inKey, durability.MaxNameLen, longest)

		// What boltstore holds under the name is read and undone.
		file := fmt.Sprintf("old%d.txt", i)
		if err := os.WriteFile(filepath.Join(dir, file), []byte("A1"), 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte("A1"))
		event := fmt.Sprintf(`{"write":{"call_id":"c1","path":%q,"existed":false,"new_hash":%q}}`, file, hex.EncodeToString(sum[:]))
		if err := bolt.PersistEvent(ctx, workspace.JournalKey(name, "s"), 0, []byte(event)); err != nil {
			t.Fatal(err)
		}
		bj, err := workspace.NewJournal(ws, bolt, &workspace.JournalOptions{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		if changes, err := bj.Changes(ctx, "s"); err != nil || len(changes) != 1 || changes[0].Path != file {
			t.Fatalf("%s, Changes of the journal boltstore holds: %+v, %v; want the write of %s", what, changes, err, file)
		}
		if restored, err := bj.Undo(ctx, "s", ""); err != nil || len(restored) != 1 || !restored[0].Removed {
			t.Fatalf("%s, Undo of the journal boltstore holds: %+v, %v; want %s removed", what, restored, err, file)
		}
		if got := content(t, filepath.Join(dir, file)); got != "<none>" {
			t.Errorf("%s: %s after the undo: %q, want it removed", what, file, got)
		}

		// A new session is not recorded, nor written.
		got := startJournal(t, rt, bj).call(agent.StreamID("t", 1), "c2", workspace.WriteFileToolName, `{"path":"b.txt","content":"B1"}`)
		if strings.Contains(got, `"success":true`) || content(t, filepath.Join(dir, "b.txt")) != "<none>" {
			t.Errorf("%s, a write of a new session on boltstore: %s; want it refused, not done", what, got)
		}
		for _, n := range []int{len(name), inKey, durability.MaxNameLen, longest} {
			if !strings.Contains(got, strconv.Itoa(n)) {
				t.Errorf("%s, the refused write: %s does not say %d", what, got, n)
			}
		}
	}
}

// invalidName fails unless err wraps durability.ErrInvalidName with a
// short message that says each of numbers.
func invalidName(t *testing.T, what string, err error, numbers ...int) {
	t.Helper()
	if !errors.Is(err, durability.ErrInvalidName) || len(err.Error()) > 600 {
		t.Fatalf("%s: %v, want durability.ErrInvalidName, short", what, err)
	}
	for _, n := range numbers {
		if !strings.Contains(err.Error(), strconv.Itoa(n)) {
			t.Errorf("%s: %q does not say %d", what, err, n)
		}
	}
}

// TestJournal_KeysFitEveryStore: a journal named as its agent records
// the session of the longest id the agent takes with a Store, on every
// store; one whose name is longer than the agent's, whose key for that
// session would pass durability.MaxNameLen, refuses the session up front
// on every store (boltstore would take the key, where memstore and
// pgstore do not): its write is not done, and Changes fails with an
// error wrapping durability.ErrInvalidName that says the lengths and
// the limit.
func TestJournal_KeysFitEveryStore(t *testing.T) {
	for _, s := range []struct {
		name string
		open func(t *testing.T) durability.Store
	}{
		{"memstore", func(t *testing.T) durability.Store { return memstore.New(nil) }},
		{"boltstore", func(t *testing.T) durability.Store { return boltJournalStore(t) }},
	} {
		t.Run(s.name, func(t *testing.T) {
			store := s.open(t)
			defer store.Close()
			ctx := undoCtx(t)
			dir := t.TempDir()
			ws, err := workspace.New(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Close()
			rt := actorstest.NewRuntime(t, nil)
			name := strings.Repeat("team/", 40) // 200 bytes, 280 in a key
			id := strings.Repeat("s", durability.MaxNameLen-len(agent.SessionKey(name, ""))-len(tools.ApprovalStoreSuffix))

			j, err := workspace.NewJournal(ws, store, &workspace.JournalOptions{Name: name})
			if err != nil {
				t.Fatal(err)
			}
			startJournal(t, rt, j).write(agent.StreamID(id, 1), "c1", "a.txt", "A1")
			if changes, err := j.Changes(ctx, id); err != nil || len(changes) != 1 {
				t.Fatalf("the journal named as the agent, session of %d bytes: %+v, %v; want the one write", len(id), changes, err)
			}

			longer := name + "more/"
			lj, err := workspace.NewJournal(ws, store, &workspace.JournalOptions{Name: longer})
			if err != nil {
				t.Fatal(err)
			}
			key := len(workspace.JournalKey(longer, id))
			got := startJournal(t, rt, lj).call(agent.StreamID(id, 1), "c2", workspace.WriteFileToolName, `{"path":"b.txt","content":"B1"}`)
			if strings.Contains(got, `"success":true`) || content(t, filepath.Join(dir, "b.txt")) != "<none>" {
				t.Fatalf("a write whose journal key is %d bytes: %s, b.txt %q; want it refused, not done", key, got, content(t, filepath.Join(dir, "b.txt")))
			}
			// Reading such a key is the store's to answer: memstore
			// refuses the name, boltstore holds nothing there.
			changes, err := lj.Changes(ctx, id)
			if s.name == "boltstore" {
				if err != nil || len(changes) != 0 {
					t.Errorf("Changes of a session whose journal key is %d bytes, on boltstore: %+v, %v; want none", key, changes, err)
				}
			} else {
				invalidName(t, fmt.Sprintf("Changes of a session whose journal key is %d bytes", key), err, key, len(id), len(longer), durability.MaxNameLen)
			}
		})
	}
}

// TestJournal_ReadsJournalsUnderLongKeys: a journal that boltstore
// holds under a key longer than durability.MaxNameLen (written before
// the journal kept its keys within that limit) is still read: Changes
// lists its writes, and Undo restores them and records the undo there.
// Only a new key that long is refused, by the write that would make it.
func TestJournal_ReadsJournalsUnderLongKeys(t *testing.T) {
	store := boltJournalStore(t)
	ctx := undoCtx(t)
	dir := t.TempDir()
	ws, j := newJournal(t, dir, store)
	id := strings.Repeat("s", durability.MaxNameLen)
	key := workspace.JournalKey("", id)
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("A1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := store.PersistEvent(ctx, key, 0, journalWrite("c1", "a.txt", "A1")); err != nil {
		t.Fatalf("boltstore takes a key of %d bytes: %v", len(key), err)
	}
	changes, err := j.Changes(ctx, id)
	if err != nil || len(changes) != 1 || changes[0].Path != "a.txt" || !changes[0].Created {
		t.Fatalf("Changes of the journal under a key of %d bytes: %+v, %v; want the write of a.txt", len(key), changes, err)
	}
	restored, err := j.Undo(ctx, id, "")
	if err != nil || len(restored) != 1 || !restored[0].Removed {
		t.Fatalf("Undo of the journal under a key of %d bytes: %+v, %v; want a.txt removed", len(key), restored, err)
	}
	if got := content(t, filepath.Join(dir, "a.txt")); got != "<none>" {
		t.Errorf("a.txt after the undo: %q, want it removed", got)
	}
	// The undo is recorded: a journal read afresh lists nothing.
	j2, err := workspace.NewJournal(ws, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	if changes, err := j2.Changes(ctx, id); err != nil || len(changes) != 0 {
		t.Errorf("Changes after the undo, read afresh: %+v, %v; want none", changes, err)
	}
	// A key that long holding nothing yet is not made.
	other := strings.Repeat("t", durability.MaxNameLen)
	rt := actorstest.NewRuntime(t, nil)
	got := startJournal(t, rt, j2).call(agent.StreamID(other, 1), "c2", workspace.WriteFileToolName, `{"path":"b.txt","content":"B1"}`)
	if strings.Contains(got, `"success":true`) || content(t, filepath.Join(dir, "b.txt")) != "<none>" {
		t.Errorf("a write whose new journal key is %d bytes: %s; want it refused, not done", len(workspace.JournalKey("", other)), got)
	}
	empty := true
	if err := store.GetEvents(ctx, workspace.JournalKey("", other), 0, 0, func(uint64, []byte) error { empty = false; return nil }); err != nil || !empty {
		t.Errorf("the refused write's journal key: %v, holds events %v; want nothing stored", err, !empty)
	}
}

// TestJournal_ErrorsQuoteSessionClipped: the journal's errors quote a
// session id, and a call id, clipped, whole characters only, with
// their lengths: an agent's session ids run to a thousand bytes.
func TestJournal_ErrorsQuoteSessionClipped(t *testing.T) {
	store := memstore.New(nil)
	_, j := newJournal(t, t.TempDir(), store)
	session := "a" + strings.Repeat("é", 400) // odd: a cut at a byte count falls inside an é
	call := "c" + strings.Repeat("é", 300)
	ctx := t.Context()
	_, err := j.Undo(ctx, session, call)
	if !errors.Is(err, workspace.ErrNoSuchCall) {
		t.Fatalf("Undo from a call the session never made: %v, want ErrNoSuchCall", err)
	}
	clippedQuotes(t, err.Error(), len(session), len(call))
	store.Close()
	_, err = j.Changes(ctx, session+"x")
	if err == nil {
		t.Fatal("Changes on a closed store: no error")
	}
	// What the journal says of it: the store's error, wrapped, is the
	// store's.
	clippedQuotes(t, strings.TrimSuffix(err.Error(), errors.Unwrap(err).Error()), len(session)+1)
}

// clippedQuotes fails unless msg is short, says each of lengths, and
// quotes whole UTF-8 characters (%q escapes the bytes of a cut one).
func clippedQuotes(t *testing.T, msg string, lengths ...int) {
	t.Helper()
	if len(msg) > 600 || !utf8.ValidString(msg) || strings.Contains(msg, `\x`) {
		t.Errorf("%q: want it short, with whole characters", msg)
	}
	for _, n := range lengths {
		if !strings.Contains(msg, strconv.Itoa(n)) {
			t.Errorf("%q does not say %d", msg, n)
		}
	}
}

// TestJournal_OldNameNotMovedToALongKey: a journal an earlier version
// kept under an old name (the session id and JournalStoreSuffix, or the
// previous version's key) is moved to its JournalKey as it is first
// read, unless that key would pass durability.MaxNameLen, which no
// write makes (boltstore would take it, memstore and pgstore not). It
// is then read where it is, and grows there: Changes lists its writes,
// Undo restores them and records the undo under the old name, and no
// key that long is made.
func TestJournal_OldNameNotMovedToALongKey(t *testing.T) {
	for _, c := range []struct {
		what string
		old  func(id string) string
	}{
		{"the id and JournalStoreSuffix", func(id string) string { return id + workspace.JournalStoreSuffix }},
		{"the previous version's key", func(id string) string { return keyOfV1(agent.DefaultName, id) }},
	} {
		t.Run(c.what, func(t *testing.T) {
			store := boltJournalStore(t)
			ctx := undoCtx(t)
			dir := t.TempDir()
			ws, j := newJournal(t, dir, store)
			id := strings.Repeat("s", durability.MaxNameLen-len(workspace.JournalStoreSuffix))
			old, key := c.old(id), workspace.JournalKey("", id)
			if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("A1"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := store.PersistEvent(ctx, old, 0, journalWrite("c1", "a.txt", "A1")); err != nil {
				t.Fatal(err)
			}
			changes, err := j.Changes(ctx, id)
			if err != nil || len(changes) != 1 || changes[0].Path != "a.txt" {
				t.Fatalf("Changes of the journal under %s (%d bytes), its JournalKey %d bytes: %+v, %v; want the write of a.txt",
					c.what, len(old), len(key), changes, err)
			}
			if n := countEvents(t, store, key); n != 0 {
				t.Errorf("the JournalKey of %d bytes holds %d events; want none: no key passes durability.MaxNameLen", len(key), n)
			}
			restored, err := j.Undo(ctx, id, "")
			if err != nil || len(restored) != 1 || !restored[0].Removed {
				t.Fatalf("Undo of the journal under %s: %+v, %v; want a.txt removed", c.what, restored, err)
			}
			if n := countEvents(t, store, key); n != 0 {
				t.Errorf("the JournalKey of %d bytes holds %d events after the undo; want none", len(key), n)
			}
			if n := countEvents(t, store, old); n != 2 {
				t.Errorf("the old name holds %d events after the undo; want the write and its undo", n)
			}
			j2, err := workspace.NewJournal(ws, store, nil)
			if err != nil {
				t.Fatal(err)
			}
			if changes, err := j2.Changes(ctx, id); err != nil || len(changes) != 0 {
				t.Errorf("Changes after the undo, read afresh: %+v, %v; want none", changes, err)
			}
		})
	}
}

// boltJournalStore is a new boltstore, closed after the test: a store
// that takes keys longer than durability.MaxNameLen.
func boltJournalStore(t *testing.T) *boltstore.Store {
	t.Helper()
	store, err := boltstore.Open(filepath.Join(t.TempDir(), "journal.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}
