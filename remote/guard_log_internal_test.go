package remote

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	paremote "github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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

// countingLog is a slog handler that keeps the total (the value of the
// attribute named *_total) of each record.
type countingLog struct {
	mu     sync.Mutex
	totals []int64
}

func (h *countingLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *countingLog) WithGroup(string) slog.Handler            { return h }
func (h *countingLog) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	total := int64(-1)
	r.Attrs(func(a slog.Attr) bool {
		if strings.HasSuffix(a.Key, "_total") {
			total = a.Value.Int64()
		}
		return true
	})
	h.totals = append(h.totals, total)
	return nil
}

// TestGuard_DropLogBounded: a peer may send batches of one bad envelope
// each, a few bytes apiece, from several streams at once: the guard
// drops and counts every one, and logs the first and then each time the
// count doubles (with the total), so that the log grows with the log of
// what the peer sends, not many times faster than it.
func TestGuard_DropLogBounded(t *testing.T) {
	logs := &countingLog{}
	g := &guard{log: slog.New(logs)}
	const streams, batches = 4, 1000
	var wg sync.WaitGroup
	for range streams {
		wg.Go(func() {
			for range batches {
				g.filter(&paremote.MessageBatch{Envelopes: []*paremote.MessageEnvelope{{TypeId: 3}}})
			}
		})
	}
	wg.Wait()
	if g.Dropped() != streams*batches {
		t.Fatalf("dropped %d, want %d", g.Dropped(), streams*batches)
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	if len(logs.totals) > 13 {
		t.Fatalf("%d records logged for %d dropped envelopes, want one per doubling of the count (13)", len(logs.totals), streams*batches)
	}
	seen := map[int64]bool{}
	for _, n := range logs.totals {
		seen[n] = true
	}
	for n := int64(1); n <= streams*batches; n *= 2 {
		if !seen[n] {
			t.Errorf("no record logged when the count reached %d (totals logged: %v)", n, logs.totals)
		}
	}
}

// TestGuard_UnaryRefusalLogBounded: a unary call takes a peer a few
// bytes (its headers compressed), and each is refused: the refusals are
// logged the first time and then each time their count doubles.
func TestGuard_UnaryRefusalLogBounded(t *testing.T) {
	logs := &countingLog{}
	g := &guard{log: slog.New(logs)}
	info := &grpc.UnaryServerInfo{FullMethod: "/remote.Remoting/ListProcesses"}
	for range 1000 {
		if _, err := g.refuseUnary(context.Background(), nil, info, nil); status.Code(err) != codes.Unimplemented {
			t.Fatalf("unary call answered %v, want codes.Unimplemented", err)
		}
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	if want := []int64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}; fmt.Sprint(logs.totals) != fmt.Sprint(want) {
		t.Errorf("%d refusals logged with totals %.60v..., want %v", len(logs.totals), logs.totals, want)
	}
}
