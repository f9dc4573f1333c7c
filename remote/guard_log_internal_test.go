package remote

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	paremote "github.com/asynkron/protoactor-go/remote"
)

// sizedLog is a slog handler that keeps the largest string attribute
// value it was given and how many records it got.
type sizedLog struct {
	mu      sync.Mutex
	records int
	largest int
}

func (h *sizedLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *sizedLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *sizedLog) WithGroup(string) slog.Handler            { return h }
func (h *sizedLog) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records++
	r.Attrs(func(a slog.Attr) bool {
		h.largest = max(h.largest, len(a.Value.String()))
		return true
	})
	return nil
}

// TestGuard_DroppedTypeNameClipped: a peer names the type of its
// envelopes itself, at any length the wire takes (megabytes), and may
// point a batch's every envelope at one such name: the guard drops them
// and logs them once for the batch, with the first one's name clipped,
// so that one batch does not make the log as many times larger than
// itself as it has envelopes.
func TestGuard_DroppedTypeNameClipped(t *testing.T) {
	logs := &sizedLog{}
	g := &guard{log: slog.New(logs)}
	huge := strings.Repeat("stranger.", 1<<17) + "Type" // over 1 MiB, a valid name
	b := &paremote.MessageBatch{TypeNames: []string{huge, huge + "!"}, Targets: []*actor.PID{actor.NewPID("127.0.0.1:7", "a")}}
	for i := range 100 {
		b.Envelopes = append(b.Envelopes, &paremote.MessageEnvelope{TypeId: int32(i % 2)})
	}
	g.filter(b)
	if len(b.Envelopes) != 0 || g.Dropped() != 100 {
		t.Fatalf("kept %d envelopes, dropped %d; want all 100 dropped", len(b.Envelopes), g.Dropped())
	}
	if logs.records != 1 || logs.largest > maxNameInAnswer+len("…") {
		t.Errorf("%d records logged, the largest value %d bytes; want one, the type name clipped to %d", logs.records, logs.largest, maxNameInAnswer)
	}
}
