//go:build unix

package workspace

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
)

// A link a write goes through, retargeted between the journal's look and
// the write (a command can do it at any time): the journal records what
// the write replaces, or the write is refused; Undo never reports
// success with the session's content left in place.
func TestJournal_UndoAfterLinkRetargeted(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]string{"a.txt": "A0", "b.txt": "B0"} {
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
	defer ws.Close()
	calls := 0
	ws.hookBeforeName = func() {
		// A command retargets the link after the journal opened its
		// target and before the write opens its own.
		if calls++; calls == 1 {
			os.Remove(link)
			os.Symlink("b.txt", link)
		}
	}
	j, err := NewJournal(ws, memstore.New(nil), nil)
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
		args, _ := json.Marshal(WriteFileInput{Path: "notes.txt", Content: "NEW"})
		if err := conn.Send(messages.ToolCall("s1", "c1", WriteFileToolName, args)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		frames, err := conn.RecvStream(ctx, "s1")
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range frames {
			if f.GetType() == messages.FrameType_TOOL_RESULT {
				t.Logf("write_file result: %s", f.GetPayload())
			}
		}
	}
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
