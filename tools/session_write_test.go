package tools_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// writeCounter counts the writes a session makes to its store.
type writeCounter struct {
	durability.Store
	mu     sync.Mutex
	writes int
}

func (s *writeCounter) count() {
	s.mu.Lock()
	s.writes++
	s.mu.Unlock()
}

func (s *writeCounter) PersistEvents(ctx context.Context, name string, first uint64, data [][]byte) error {
	s.count()
	return s.Store.PersistEvents(ctx, name, first, data)
}

func (s *writeCounter) PersistEvent(ctx context.Context, name string, index uint64, data []byte) error {
	s.count()
	return s.Store.PersistEvent(ctx, name, index, data)
}

func (s *writeCounter) PersistSnapshot(ctx context.Context, name string, index uint64, data []byte) error {
	s.count()
	return s.Store.PersistSnapshot(ctx, name, index, data)
}

// TestSession_ArgumentUpToBufferBytesIsOneWrite: a streamed argument of
// BufferBytes or less (1 MiB by default) is written with the step that
// completes the call, so the conversation makes as many store writes as
// one with a small argument (every write is a commit and its fsyncs on an
// on-disk store); a larger one makes a write when more than BufferBytes
// are waiting.
func TestSession_ArgumentUpToBufferBytesIsOneWrite(t *testing.T) {
	sink, err := tools.New(tools.Definition{Name: "sink", Handler: func(context.Context, json.RawMessage) (any, error) {
		return "ok", nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	rt := newRuntime(t)
	writes := func(id string, argSize, bufferBytes int) int {
		t.Helper()
		args := `{"data":"` + strings.Repeat("x", argSize-len(`{"data":""}`)) + `"}`
		model := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
			{ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "sink", Arguments: args, Split: max(1, argSize/256)}}},
			{Text: "Stored."},
		}}, nil)
		store := &writeCounter{Store: memstore.New(nil)}
		t.Cleanup(func() { store.Close() })
		loop, err := tools.NewLoop(model.Spec("model"), &tools.LoopOptions{
			RouterOptions: tools.RouterOptions{Name: "loop-" + id, Tools: []*tools.Tool{sink}},
			Session:       &tools.SessionOptions{ID: id, Store: store, BufferBytes: bufferBytes},
		})
		if err != nil {
			t.Fatal(err)
		}
		conn := start(t, rt, loop)
		send(t, conn, messages.RawParam("s", models.ParamMessages, json.RawMessage(`[{"role":"user","content":"store this"}]`)), messages.End("s"))
		got, err := conn.RecvStream(testCtx(t), "s")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.Join(lines(got), "\n"), `TEXT stream=s text="Stored."`) {
			t.Fatalf("%s: no answer: %q", id, lines(got))
		}
		store.mu.Lock()
		defer store.mu.Unlock()
		return store.writes
	}
	small := writes("small", 1<<10, 0)
	if got := writes("default", tools.DefaultSessionBufferBytes, 0); got != small {
		t.Errorf("a %d-byte argument under the default buffer made %d writes, a small one %d: want the same", tools.DefaultSessionBufferBytes, got, small)
	}
	if got := writes("exact", 64<<10, 64<<10); got != small {
		t.Errorf("an argument of exactly BufferBytes made %d writes, a small one %d: want the same", got, small)
	}
	if got := writes("over", 64<<10+512, 64<<10); got != small+1 {
		t.Errorf("an argument past BufferBytes made %d writes, want %d (one when the buffer filled)", got, small+1)
	}
}
