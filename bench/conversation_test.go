package main

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
)

// Allocation budgets of one run of figure 7's conversation through our
// loop (the scripted model's 4 turns, 3 tool calls, every frame between
// the caller, the loop and the model, as the benchmark plays it): a
// change that adds allocations to the loop's hot path fails here rather
// than in a benchmark nobody reads. What a run allocates is listed in
// bench/README.md (figure 7).
const (
	loopAllocsSync      = 24 // 23 on 2026-12-04 (34 on 2026-12-03)
	loopAllocsAsync     = 66 // 65 (76)
	loopAllocsStreaming = 40 // 39 (49): the streaming conversation, tools sync
)

func TestLoopConversation_Allocs(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	for _, c := range []struct {
		name   string
		start  func() (*loopConversation, error)
		budget float64
	}{
		{"sync tools", func() (*loopConversation, error) { return newLoopConversation(true) }, loopAllocsSync},
		{"async tools", func() (*loopConversation, error) { return newLoopConversation(false) }, loopAllocsAsync},
		{"streaming", newStreamingConversation, loopAllocsStreaming},
	} {
		t.Run(c.name, func(t *testing.T) {
			lc, err := c.start()
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := lc.Close(); err != nil {
					t.Error(err)
				}
			}()
			ctx := context.Background()
			var runErr error
			allocs := testing.AllocsPerRun(200, func() {
				if err := lc.run(ctx); err != nil && runErr == nil {
					runErr = err
				}
			})
			if runErr != nil {
				t.Fatal(runErr)
			}
			t.Logf("%.1f allocations per run (budget %v)", allocs, c.budget)
			if !raceDetector && allocs > c.budget {
				t.Errorf("a run allocates %.1f times, budget %v", allocs, c.budget)
			}
		})
	}
}
