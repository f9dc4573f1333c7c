package agent

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/models/scripted"
)

// BenchmarkCallMark: what an agent keeps of one tool call its
// conversation waits for. "goroutine-id" is how delegations were told
// apart before tools.RouterOptions.OnCall (kept here as the baseline:
// the handler's goroutine id read from its stack trace, counted in a map
// under the agent's lock, and taken out again); "on-call" is the
// agent's OnCall hook around a handler, as every call now passes it.
func BenchmarkCallMark(b *testing.B) {
	rt := actorstest.NewRuntime(b, nil)
	a, err := New(rt, scripted.MustNew(scripted.Script{Turns: []scripted.Turn{{Text: "Done."}}}, nil).Spec("model"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close(context.Background())
	b.Run("goroutine-id", func(b *testing.B) {
		handling := map[uint64]int{}
		b.ReportAllocs()
		for b.Loop() {
			g := stackGoid()
			a.mu.Lock()
			handling[g]++
			a.mu.Unlock()
			a.mu.Lock()
			if handling[g]--; handling[g] == 0 {
				delete(handling, g)
			}
			a.mu.Unlock()
		}
	})
	b.Run("on-call", func(b *testing.B) {
		hook := trackCalls(a.self, a.calls)
		ctx := handlerContexts(b, rt, 1)[0]
		b.ReportAllocs()
		for b.Loop() {
			hook(ctx, false)
			hook(ctx, true)
		}
	})
	// Every core's handlers at once, as the calls of many conversations
	// run, each with a ctx of its own: they contend for what the hook
	// locks, and for the lines of what it touches.
	b.Run("on-call-parallel", func(b *testing.B) {
		hook := trackCalls(a.self, a.calls)
		const handlers = 64 // more than the cores: each goroutine its own ctx
		ctxs := handlerContexts(b, rt, handlers)
		var next atomic.Int64
		b.ReportAllocs()
		b.ResetTimer() // past the calls that gave the ctxs
		b.RunParallel(func(pb *testing.PB) {
			ctx := ctxs[(next.Add(1)-1)%handlers]
			for pb.Next() {
				hook(ctx, false)
				hook(ctx, true)
			}
		})
	})
}

// stackGoid is the goroutine id as the header of its stack trace gives
// it, the way Agent told delegations' goroutines apart before OnCall.
func stackGoid() uint64 {
	var buf [64]byte
	s := buf[:runtime.Stack(buf[:], false)]
	s, ok := bytes.CutPrefix(s, []byte("goroutine "))
	if i := bytes.IndexByte(s, ' '); ok && i > 0 {
		if n, err := strconv.ParseUint(string(s[:i]), 10, 64); err == nil {
			return n
		}
	}
	return 0
}
