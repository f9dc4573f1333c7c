package workspace_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/boltstore"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/workspace"
)

func undoCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// journaled starts the journal's tools as tool actors; call runs one
// call of a tool on a stream and returns its result's payload.
type journaled struct {
	t     *testing.T
	conns map[string]*actors.Conn
}

func startJournal(t *testing.T, rt *actors.Runtime, j *workspace.Journal) *journaled {
	t.Helper()
	all, err := j.Tools()
	if err != nil {
		t.Fatal(err)
	}
	undo, err := j.UndoTool()
	if err != nil {
		t.Fatal(err)
	}
	jt := &journaled{t: t, conns: map[string]*actors.Conn{}}
	for _, tool := range append(all, undo) {
		conn, err := rt.Start(tool.Spec())
		if err != nil {
			t.Fatal(err)
		}
		jt.conns[tool.Name()] = conn
	}
	return jt
}

func (jt *journaled) call(stream, id, tool, args string) string {
	jt.t.Helper()
	return string(jt.frame(stream, id, tool, args).GetPayload())
}

// frame runs one call of a tool on a stream and returns its result.
func (jt *journaled) frame(stream, id, tool, args string) *messages.Frame {
	jt.t.Helper()
	conn := jt.conns[tool]
	if err := conn.Send(messages.ToolCall(stream, id, tool, json.RawMessage(args))); err != nil {
		jt.t.Fatal(err)
	}
	frames, err := conn.RecvStream(undoCtx(jt.t), stream)
	if err != nil {
		jt.t.Fatal(err)
	}
	for _, f := range frames {
		if f.GetType() == messages.FrameType_TOOL_RESULT {
			return f
		}
	}
	jt.t.Fatalf("no result among %d frames", len(frames))
	return nil
}

func (jt *journaled) write(stream, id, path, content string) {
	jt.t.Helper()
	args, _ := json.Marshal(workspace.WriteFileInput{Path: path, Content: content})
	if got := jt.call(stream, id, workspace.WriteFileToolName, string(args)); !strings.Contains(got, `"success":true`) {
		jt.t.Fatalf("write %s: %s", path, got)
	}
}

func newJournal(t *testing.T, dir string, store durability.Store) (*workspace.Workspace, *workspace.Journal) {
	t.Helper()
	ws, err := workspace.New(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	j, err := workspace.NewJournal(ws, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ws, j
}

func content(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "<none>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func restoredString(rs []workspace.Restored) string {
	var parts []string
	for _, r := range rs {
		s := r.CallID + ":" + r.Path
		if r.Removed {
			s += "(removed)"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

// TestJournal_Undo: overwrite, create and a second write of one file are
// undone newest first, to the state before a given call, then all of
// them: the created file is removed, the overwritten one gets its content
// and permissions back. Another session's writes are not touched.
func TestJournal_Undo(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "b.txt"), []byte("old b"), 0o600); err != nil {
		t.Fatal(err)
	}
	rt := actorstest.NewRuntime(t, nil)
	_, j := newJournal(t, dir, memstore.New(nil))
	jt := startJournal(t, rt, j)
	ctx := undoCtx(t)
	jt.write("s1", "c1", "a.txt", "A1")
	jt.write("s1", "c2", "b.txt", "B2")
	jt.write("s1#2", "c3", "a.txt", "A3") // a later attempt of the same session
	jt.write("s2", "x1", "other.txt", "other")
	changes, err := j.Changes(ctx, "s1")
	if err != nil || len(changes) != 3 || !changes[0].Created || changes[1].Created {
		t.Fatalf("changes %+v %v", changes, err)
	}

	restored, err := j.Undo(ctx, "s1", "c2")
	if err != nil {
		t.Fatal(err)
	}
	if got := restoredString(restored); got != "c3:a.txt c2:b.txt" {
		t.Fatalf("restored %s", got)
	}
	if content(t, filepath.Join(dir, "a.txt")) != "A1" || content(t, filepath.Join(dir, "b.txt")) != "old b" {
		t.Fatalf("a=%q b=%q", content(t, filepath.Join(dir, "a.txt")), content(t, filepath.Join(dir, "b.txt")))
	}
	if fi, err := os.Stat(filepath.Join(dir, "b.txt")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("b.txt mode %v %v", fi.Mode(), err)
	}
	if _, err := j.Undo(ctx, "s1", "c2"); !errors.Is(err, workspace.ErrNoSuchCall) {
		t.Fatalf("undo twice: %v", err)
	}

	// Through the tool, from a stream of the session: everything left.
	got := jt.call("s1", "u1", workspace.UndoToolName, `{}`)
	if !strings.Contains(got, `"success":true`) || !strings.Contains(got, `"removed":true`) {
		t.Fatalf("undo tool: %s", got)
	}
	if content(t, filepath.Join(dir, "a.txt")) != "<none>" || content(t, filepath.Join(dir, "other.txt")) != "other" {
		t.Fatalf("after undoing all: a=%q other=%q", content(t, filepath.Join(dir, "a.txt")), content(t, filepath.Join(dir, "other.txt")))
	}
	if changes, err := j.Changes(ctx, "s1"); err != nil || len(changes) != 0 {
		t.Fatalf("changes left %+v %v", changes, err)
	}
}

// TestJournal_RefusedAfterOutsideChange: a file changed by something
// else since the session wrote it makes the undo restore nothing; once
// the change is reverted the undo goes through.
func TestJournal_RefusedAfterOutsideChange(t *testing.T) {
	dir := t.TempDir()
	rt := actorstest.NewRuntime(t, nil)
	_, j := newJournal(t, dir, memstore.New(nil))
	jt := startJournal(t, rt, j)
	ctx := undoCtx(t)
	jt.write("s1", "c1", "a.txt", "mine")
	jt.write("s1", "c2", "b.txt", "also mine")
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("someone else's"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := j.Undo(ctx, "s1", "")
	if !errors.Is(err, workspace.ErrChangedSince) || !strings.Contains(err.Error(), "a.txt") {
		t.Fatalf("undo: %v", err)
	}
	if content(t, filepath.Join(dir, "a.txt")) != "someone else's" || content(t, filepath.Join(dir, "b.txt")) != "also mine" {
		t.Fatal("a refused undo changed files")
	}
	got := jt.call("s1", "u1", workspace.UndoToolName, `{"call_id":"c1"}`)
	if !strings.Contains(got, `"success":false`) || !strings.Contains(got, "changed since") {
		t.Fatalf("undo tool: %s", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if restored, err := j.Undo(ctx, "s1", ""); err != nil || len(restored) != 2 {
		t.Fatalf("undo: %v %+v", err, restored)
	}
}

// TestJournal_UndoAcrossRestart: the journal is in a bbolt file; a new
// process (store, workspace, journal) undoes the writes of the first.
// A refused write records nothing.
func TestJournal_UndoAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	files := filepath.Join(dir, "files")
	if err := os.Mkdir(files, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(files, "keep.txt"), []byte("v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "sessions.db")
	func() {
		store, err := boltstore.Open(db, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		rt := actorstest.NewRuntime(t, nil)
		defer rt.Close(context.Background())
		ws, err := workspace.New(files, &workspace.Options{AllowedExtensions: []string{".txt"}})
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		j, err := workspace.NewJournal(ws, store, nil)
		if err != nil {
			t.Fatal(err)
		}
		jt := startJournal(t, rt, j)
		jt.write("s1", "c1", "keep.txt", "v2")
		jt.write("s1", "c2", "dir/new.txt", "fresh")
		if got := jt.call("s1", "c3", workspace.WriteFileToolName, `{"path":"evil.sh","content":"x"}`); !strings.Contains(got, `"success":false`) {
			t.Fatalf("refused write: %s", got)
		}
	}()
	store, err := boltstore.Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	_, j := newJournal(t, files, store)
	ctx := undoCtx(t)
	changes, err := j.Changes(ctx, "s1")
	if err != nil || len(changes) != 2 {
		t.Fatalf("changes %+v %v", changes, err)
	}
	restored, err := j.Undo(ctx, "s1", "")
	if err != nil || restoredString(restored) != "c2:dir/new.txt(removed) c1:keep.txt" {
		t.Fatalf("undo: %v %s", err, restoredString(restored))
	}
	if content(t, filepath.Join(files, "keep.txt")) != "v1" || content(t, filepath.Join(files, "dir", "new.txt")) != "<none>" {
		t.Fatal("not restored")
	}
	// The undo itself is recorded: another process does not repeat it.
	_, j2 := newJournal(t, files, store)
	if changes, err := j2.Changes(ctx, "s1"); err != nil || len(changes) != 0 {
		t.Fatalf("changes after undo %+v %v", changes, err)
	}
}

// A failed undo through the tool is an error result of the call, as the
// other workspace tools' failures are: the model reads the undo's own
// JSON, and the frame's failure kind says whether the call asked for
// what cannot be done (invalid_arguments), named a write there is not
// (not_found) or the workspace failed (handler_error); a successful undo
// is not an error result.
func TestUndoTool_FailuresAreErrorResults(t *testing.T) {
	dir := t.TempDir()
	rt := actorstest.NewRuntime(t, nil)
	ws, j := newJournal(t, dir, memstore.New(nil))
	jt := startJournal(t, rt, j)
	jt.write("s1", "c1", "a.txt", "mine")
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("someone else's"), 0o644); err != nil {
		t.Fatal(err)
	}
	check := func(id, args string, kind tools.FailureKind, payload ...string) {
		t.Helper()
		f := jt.frame("s1", id, workspace.UndoToolName, args)
		if f.IsErrorResult() != (kind != "") || tools.KindOf(f) != kind {
			t.Errorf("undo %s: error result %v kind %q, want kind %q (%s)", args, f.IsErrorResult(), tools.KindOf(f), kind, f.GetPayload())
		}
		for _, want := range payload {
			if !strings.Contains(string(f.GetPayload()), want) {
				t.Errorf("undo %s: payload %s, want it to hold %s", args, f.GetPayload(), want)
			}
		}
	}
	check("u1", `{"call_id":"nope"}`, tools.FailureNotFound, `{"success":false,"error":`, "no recorded write")
	check("u2", `{}`, tools.FailureInvalidArguments, `{"success":false,"error":`, "changed since", "a.txt")
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	check("u3", `{}`, "", `"success":true`, `"path":"a.txt"`)
	ws.Close() // the workspace itself cannot undo any more
	check("u4", `{}`, tools.FailureHandler, `"success":false`, "closed")
}
