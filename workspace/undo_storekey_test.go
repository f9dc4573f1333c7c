package workspace_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/workspace"
)

// TestJournal_SharesTheAgentsStore: the journal may live in the store of
// the agent whose sessions it records (the Journal doc says the session's
// own store works, and demo -undo does so). Its records must then never
// be read as one of the agent's sessions: the journal of session "bot"
// of the agent named "bot" and the session "undo" of that agent
// (agent.SessionKey "bot/undo") are two things.
func TestJournal_SharesTheAgentsStore(t *testing.T) {
	dir := t.TempDir()
	store := memstore.New(nil)
	defer store.Close()
	rt := actorstest.NewRuntime(t, nil)
	_, j := newJournal(t, dir, store)
	jt := startJournal(t, rt, j)
	jt.write(agent.StreamID("bot", 1), "c1", "a.txt", "A1") // session "bot" writes a file

	// Session "undo" of agent "bot" was never run: the store holds no
	// such session.
	key := agent.SessionKey("bot", "undo")
	st, ok, err := tools.ReadSession(undoCtx(t), store, key)
	if err != nil || ok {
		t.Fatalf("session %q of agent bot, never run, reads as ok=%v (%d steps), err %v: the journal of session %q is stored under its key",
			"undo", ok, st.GetSteps(), err, "bot")
	}
}

// TestJournal_AgentSessionUnderOldName: an agent's session stored under
// what an earlier version named a journal (session "undo" of agent
// "bot" is "bot/undo", the old name of the journal of session "bot") is
// not read as that journal: session "bot" writes and undoes, and the
// agent's session is left as it was.
func TestJournal_AgentSessionUnderOldName(t *testing.T) {
	dir := t.TempDir()
	store := memstore.New(nil)
	defer store.Close()
	ctx := undoCtx(t)
	key := agent.SessionKey("bot", "undo")
	notJSON := []byte{0x0a, 0x03, 'a', 'b', 'c'}
	if err := store.PersistEvent(ctx, key, 0, notJSON); err != nil {
		t.Fatal(err)
	}
	rt := actorstest.NewRuntime(t, nil)
	_, j := newJournal(t, dir, store)
	jt := startJournal(t, rt, j)
	jt.write(agent.StreamID("bot", 1), "c1", "a.txt", "A1")
	if changes, err := j.Changes(ctx, "bot"); err != nil || len(changes) != 1 || changes[0].CallID != "c1" {
		t.Fatalf("changes of session bot: %+v, %v; want the one write", changes, err)
	}
	if _, err := j.Undo(ctx, "bot", ""); err != nil {
		t.Fatal(err)
	}
	var kept [][]byte
	if err := store.GetEvents(ctx, key, 0, 0, func(_ uint64, data []byte) error { kept = append(kept, data); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(kept) != 1 || !bytes.Equal(kept[0], notJSON) {
		t.Fatalf("the agent's session %q now holds %q, want it as it was", key, kept)
	}
}

// TestJournal_OldNameMoved: a journal an earlier version stored under
// <session>/undo is read, moved to its JournalKey (the old name is
// emptied), and undone from.
func TestJournal_OldNameMoved(t *testing.T) {
	dir := t.TempDir()
	store := memstore.New(nil)
	defer store.Close()
	ctx := undoCtx(t)
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("A1"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("A1"))
	old := fmt.Sprintf(`{"write":{"call_id":"c1","path":"a.txt","existed":false,"new_hash":%q}}`, hex.EncodeToString(sum[:]))
	if err := store.PersistEvent(ctx, "s1"+workspace.JournalStoreSuffix, 0, []byte(old)); err != nil {
		t.Fatal(err)
	}
	_, j := newJournal(t, dir, store)
	if changes, err := j.Changes(ctx, "s1"); err != nil || len(changes) != 1 || changes[0].CallID != "c1" || !changes[0].Created {
		t.Fatalf("changes of s1: %+v, %v; want the write of the old journal", changes, err)
	}
	if n := countEvents(t, store, "s1"+workspace.JournalStoreSuffix); n != 0 {
		t.Errorf("the old name keeps %d events after the move", n)
	}
	if n := countEvents(t, store, workspace.JournalKey("", "s1")); n != 1 {
		t.Errorf("JournalKey holds %d events, want the 1 moved", n)
	}
	if restored, err := j.Undo(ctx, "s1", ""); err != nil || len(restored) != 1 || content(t, filepath.Join(dir, "a.txt")) != "<none>" {
		t.Fatalf("undo: %+v, %v; a.txt %q", restored, err, content(t, filepath.Join(dir, "a.txt")))
	}
}

// TestJournal_NamesApart: two agents' journals on one store, each named
// as its agent, keep the writes of their sessions apart, the same
// session id included: one's undo never undoes the other's writes.
func TestJournal_NamesApart(t *testing.T) {
	dir := t.TempDir()
	store := memstore.New(nil)
	defer store.Close()
	ctx := undoCtx(t)
	rt := actorstest.NewRuntime(t, nil)
	ws, err := workspace.New(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	var jts []*journaled
	var js []*workspace.Journal
	for _, name := range []string{"alpha", "beta"} {
		j, err := workspace.NewJournal(ws, store, &workspace.JournalOptions{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		js, jts = append(js, j), append(jts, startJournal(t, rt, j))
	}
	jts[0].write("s", "a1", "a.txt", "alpha's")
	jts[1].write("s", "b1", "b.txt", "beta's")
	if _, err := js[0].Undo(ctx, "s", ""); err != nil {
		t.Fatal(err)
	}
	if content(t, filepath.Join(dir, "a.txt")) != "<none>" || content(t, filepath.Join(dir, "b.txt")) != "beta's" {
		t.Fatalf("after alpha's undo of session s: a.txt %q, b.txt %q; want a.txt gone, b.txt beta's",
			content(t, filepath.Join(dir, "a.txt")), content(t, filepath.Join(dir, "b.txt")))
	}
}

func countEvents(t *testing.T, store durability.Store, name string) int {
	t.Helper()
	n := 0
	if err := store.GetEvents(undoCtx(t), name, 0, 0, func(uint64, []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// keyOfV1 is where the previous version kept the journal of session
// (of the journal named name): "%undo/", the name escaped, "/", the
// session id. A bare tools.Loop may use any text as its session id,
// that one too.
func keyOfV1(name, session string) string {
	return "%undo/" + strings.NewReplacer("%", "%25", "/", "%2F").Replace(name) + "/" + session
}

// TestJournal_BareLoopSessionApart: a bare tools.Loop session (no
// agent, so no agent.SessionKey) may have any id, "%undo/agent/s"
// included, which is what the previous version named the journal of
// session "s". Loop and journal then share no name: the loop's events
// are left as they are, and the journal's writes never show as a
// session of that id.
func TestJournal_BareLoopSessionApart(t *testing.T) {
	dir := t.TempDir()
	store := memstore.New(nil)
	defer store.Close()
	ctx := undoCtx(t)
	loopID := keyOfV1(agent.DefaultName, "s")
	notJSON := []byte{0x0a, 0x03, 'a', 'b', 'c'} // what a loop stores: protobuf
	if err := store.PersistEvent(ctx, loopID, 0, notJSON); err != nil {
		t.Fatal(err)
	}
	rt := actorstest.NewRuntime(t, nil)
	_, j := newJournal(t, dir, store)
	jt := startJournal(t, rt, j)
	jt.write(agent.StreamID("s", 1), "c1", "a.txt", "A1")
	if _, err := j.Undo(ctx, "s", ""); err != nil {
		t.Fatal(err)
	}
	var kept [][]byte
	if err := store.GetEvents(ctx, loopID, 0, 0, func(_ uint64, data []byte) error { kept = append(kept, data); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(kept) != 1 || !bytes.Equal(kept[0], notJSON) {
		t.Fatalf("the loop's session %q now holds %q, want it as it was", loopID, kept)
	}

	// A session id that was never a loop's: the journal of "t" is not
	// stored under it either.
	jt.write(agent.StreamID("t", 1), "c2", "b.txt", "B1")
	id := keyOfV1(agent.DefaultName, "t")
	if st, ok, err := tools.ReadSession(ctx, store, id); err != nil || ok {
		t.Fatalf("session %q, never run, reads as ok=%v (%d steps), err %v: the journal of session %q is stored under its id",
			id, ok, st.GetSteps(), err, "t")
	}
	// Nor under any other text: a loop's session id is written in its
	// events as a protobuf string, which must be UTF-8, and no journal
	// key is.
	for _, c := range [][2]string{{"", "s"}, {"bot", "s"}, {"a/b", "%undo/x"}, {"%", ""}} {
		if k := workspace.JournalKey(c[0], c[1]); utf8.ValidString(k) {
			t.Errorf("JournalKey(%q, %q) = %q is UTF-8: a loop's session id can be the same", c[0], c[1], k)
		}
	}
}

// TestJournal_KeyOfV1Moved: a journal the previous version stored under
// "%undo/<name>/<session>" is read, moved to its JournalKey (the old
// name is emptied), and undone from.
func TestJournal_KeyOfV1Moved(t *testing.T) {
	dir := t.TempDir()
	store := memstore.New(nil)
	defer store.Close()
	ctx := undoCtx(t)
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("A1"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("A1"))
	old := fmt.Sprintf(`{"write":{"call_id":"c1","path":"a.txt","existed":false,"new_hash":%q}}`, hex.EncodeToString(sum[:]))
	v1 := keyOfV1(agent.DefaultName, "s1")
	if err := store.PersistEvent(ctx, v1, 0, []byte(old)); err != nil {
		t.Fatal(err)
	}
	_, j := newJournal(t, dir, store)
	if changes, err := j.Changes(ctx, "s1"); err != nil || len(changes) != 1 || changes[0].CallID != "c1" || !changes[0].Created {
		t.Fatalf("changes of s1: %+v, %v; want the write of the journal under %q", changes, err, v1)
	}
	if n := countEvents(t, store, v1); n != 0 {
		t.Errorf("the previous version's key keeps %d events after the move", n)
	}
	if n := countEvents(t, store, workspace.JournalKey("", "s1")); n != 1 {
		t.Errorf("JournalKey holds %d events, want the 1 moved", n)
	}
	if restored, err := j.Undo(ctx, "s1", ""); err != nil || len(restored) != 1 || content(t, filepath.Join(dir, "a.txt")) != "<none>" {
		t.Fatalf("undo: %+v, %v; a.txt %q", restored, err, content(t, filepath.Join(dir, "a.txt")))
	}
}

// journalWrite is a journal's event of a write that created path with
// content, as the previous versions stored it too.
func journalWrite(callID, path, content string) []byte {
	sum := sha256.Sum256([]byte(content))
	return fmt.Appendf(nil, `{"write":{"call_id":%q,"path":%q,"existed":false,"new_hash":%q}}`, callID, path, hex.EncodeToString(sum[:]))
}

// TestJournal_StaleOldCopyDeleted: a crash after a journal was moved
// from an earlier version's key and before that key was emptied leaves
// the same journal under both. The next Journal to read the session
// deletes the copy under the old key when it holds the very events the
// journal's key holds at the same indexes (the journal may have grown
// since, or lost the head of the copy to a partial delete), and leaves
// anything else there alone: other events, or a tool loop's.
func TestJournal_StaleOldCopyDeleted(t *testing.T) {
	e0, e1 := journalWrite("c1", "a.txt", "A1"), journalWrite("c2", "b.txt", "B1")
	other := journalWrite("c9", "z.txt", "Z")
	loop := []byte{0x0a, 0x03, 'a', 'b', 'c'} // what a loop stores: protobuf
	v1, suffix := keyOfV1(agent.DefaultName, "s1"), "s1"+workspace.JournalStoreSuffix
	for _, c := range []struct {
		name    string
		old     string
		first   uint64   // index of the first event under old
		events  [][]byte // under old
		current [][]byte // under the journal's key
		deleted bool
	}{
		{"previous key, journal grown since", v1, 0, [][]byte{e0}, [][]byte{e0, e1}, true},
		{"previous key, same journal", v1, 0, [][]byte{e0, e1}, [][]byte{e0, e1}, true},
		{"previous key, head deleted", v1, 1, [][]byte{e1}, [][]byte{e0, e1}, true},
		{"older name, same journal", suffix, 0, [][]byte{e0}, [][]byte{e0}, true},
		{"another journal", v1, 0, [][]byte{other}, [][]byte{e0, e1}, false},
		{"longer than the journal", v1, 0, [][]byte{e0, e1, other}, [][]byte{e0, e1}, false},
		{"one event differs", v1, 0, [][]byte{e0, other}, [][]byte{e0, e1}, false},
		{"a loop's session", v1, 0, [][]byte{loop}, [][]byte{e0}, false},
		{"an agent's session", suffix, 0, [][]byte{loop}, [][]byte{e0}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			store := memstore.New(nil)
			defer store.Close()
			ctx := undoCtx(t)
			mustPersist := func(name string, first uint64, events [][]byte) {
				t.Helper()
				if err := store.PersistEvents(ctx, name, first, events); err != nil {
					t.Fatal(err)
				}
			}
			mustPersist(c.old, c.first, c.events)
			mustPersist(workspace.JournalKey("", "s1"), 0, c.current)
			_, j := newJournal(t, dir, store)
			changes, err := j.Changes(ctx, "s1")
			if err != nil || len(changes) != len(c.current) {
				t.Fatalf("changes of s1: %+v, %v; want the %d writes of its journal", changes, err, len(c.current))
			}
			want := len(c.events)
			if c.deleted {
				want = 0
			}
			if n := countEvents(t, store, c.old); n != want {
				t.Errorf("%q holds %d events after the session was read, want %d", c.old, n, want)
			}
			if n := countEvents(t, store, workspace.JournalKey("", "s1")); n != len(c.current) {
				t.Errorf("the journal's key holds %d events, want %d", n, len(c.current))
			}
		})
	}
}
