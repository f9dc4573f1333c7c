//go:build unix

package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
)

// retargetedJournal returns a workspace dir holding a.txt, b.txt, c.txt
// and notes.txt, a link to a.txt that a command retargets to b.txt
// right after the first name a write resolves; the journal of its
// writes; and write, which calls the journal's write_file in session s1
// and returns the result's payload.
func retargetedJournal(t *testing.T) (dir string, j *Journal, write func(call, path, content string) string) {
	dir = t.TempDir()
	for name, c := range map[string]string{"a.txt": "A0", "b.txt": "B0", "c.txt": "C0"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "notes.txt")
	if err := os.Symlink("a.txt", link); err != nil {
		t.Fatal(err)
	}
	ws, err := New(dir, &Options{Sandbox: SandboxOff})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	calls := 0
	ws.hookBeforeName = func() {
		if calls++; calls == 1 { // a command retargets the link after the first resolution
			os.Remove(link)
			os.Symlink("b.txt", link)
		}
	}
	j, err = NewJournal(ws, memstore.New(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := j.Tools()
	if err != nil {
		t.Fatal(err)
	}
	rt := actorstest.NewRuntime(t, nil)
	for _, tool := range ts {
		if tool.Name() != WriteFileToolName {
			continue
		}
		conn, err := rt.Start(tool.Spec())
		if err != nil {
			t.Fatal(err)
		}
		write = func(call, path, content string) string {
			args, _ := json.Marshal(WriteFileInput{Path: path, Content: content})
			if err := conn.Send(messages.ToolCall("s1", call, WriteFileToolName, args)); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			frames, err := conn.RecvStream(ctx, "s1")
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, f := range frames {
				if f.GetType() == messages.FrameType_TOOL_RESULT {
					out = append(out, string(f.GetPayload()))
				}
			}
			return strings.Join(out, " ")
		}
	}
	return dir, j, write
}

// A link a write goes through, retargeted between the journal's look and
// the write (a command can do it at any time): the journal records what
// the write replaces, or the write is refused; Undo never reports
// success with the session's content left in place.
func TestJournal_UndoAfterLinkRetargeted(t *testing.T) {
	dir, j, write := retargetedJournal(t)
	t.Logf("write_file result: %s", write("c1", "notes.txt", "NEW"))
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return string(b)
	}
	t.Logf("after the write: a.txt=%q b.txt=%q", read("a.txt"), read("b.txt"))
	restored, err := j.Undo(context.Background(), "s1", "")
	t.Logf("Undo = %+v, %v", restored, err)
	if err == nil && (read("a.txt") != "A0" || read("b.txt") != "B0") {
		t.Errorf("Undo reported success, yet the session's write is still there: a.txt=%q b.txt=%q (want A0, B0)",
			read("a.txt"), read("b.txt"))
	}
}

// A write the journal recorded and then refused (the link retargeted
// between the record and the write) leaves no record: Changes does not
// list it, and Undo of the session's earlier writes is not refused
// because of a file the session never wrote.
func TestJournal_RefusedWriteLeavesNoRecord(t *testing.T) {
	dir, j, write := retargetedJournal(t)
	// c0: an ordinary write of c.txt, to be undone later.
	t.Logf("c0: %s", write("c0", "c.txt", "C1"))
	// c1: refused, the link was retargeted between the two resolutions.
	res := write("c1", "notes.txt", "NEW")
	t.Logf("c1: %s", res)
	if !strings.Contains(res, "elsewhere") || !strings.Contains(res, string(ReasonRetargeted)) {
		t.Fatalf("the retargeted write was not refused: %s", res)
	}
	changes, err := j.Changes(context.Background(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range changes {
		if strings.Contains(c.Path, "a.txt") || strings.Contains(c.Path, "notes") {
			t.Errorf("Changes lists a write that was refused and never happened: %+v", c)
		}
	}
	// A command of the session's then edits a.txt (the session never wrote it).
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("A-by-a-command"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Undo(context.Background(), "s1", "c0"); err != nil {
		t.Errorf("Undo of the session's only real write fails because of the refused write's record: %v (changed since: %v)",
			err, errors.Is(err, ErrChangedSince))
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "c.txt")); string(b) != "C0" {
		t.Errorf("c.txt = %q after Undo, want C0", b)
	}
}
