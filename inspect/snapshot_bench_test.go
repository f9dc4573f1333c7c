package inspect_test

import (
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/inspect"
)

// BenchmarkSnapshot is the snapshot the page's stream renders its view
// from, with the session list full and none selected (as the event
// stream of figure 7's inspector row asks for it).
func BenchmarkSnapshot(b *testing.B) {
	rt := actorstest.NewRuntime(b, nil)
	in, err := inspect.New(rt, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(in.Close)
	r := newCostRig(b, rt, in)
	for range inspect.DefaultMaxSessions + 20 {
		r.run(b)
	}
	b.ReportAllocs()
	for b.Loop() {
		in.Snapshot("")
	}
}
