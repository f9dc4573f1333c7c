package main

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
)

// agentAllocs is the allocation budget of one run of figure 7's
// conversation through agent.Run (the raw loop's run, TestLoopConversation_Allocs,
// plus what the agent adds: the encoded request, its Mux stream and the
// folded answer: 39 on 2026-12-03, 26 on 2026-12-04, 25 since the
// agent releases its Mux stream for the next run to reuse, 24 since it
// sends the encoding of a list of messages it sent before again).
const agentAllocs = 24

func TestAgentConversation_Allocs(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	f, err := newAgentFleet(1, true)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := f.Close(); err != nil {
			t.Error(err)
		}
	}()
	ctx := context.Background()
	run, runErr := 0, error(nil)
	allocs := testing.AllocsPerRun(200, func() {
		run++
		if err := f.run(ctx, 0, run); err != nil && runErr == nil {
			runErr = err
		}
	})
	if runErr != nil {
		t.Fatal(runErr)
	}
	t.Logf("%.1f allocations per run (budget %v)", allocs, agentAllocs)
	if !raceDetector && allocs > agentAllocs {
		t.Errorf("a run allocates %.1f times, budget %v", allocs, agentAllocs)
	}
}
