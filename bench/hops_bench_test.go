package main

import (
	"fmt"
	"testing"
)

// BenchmarkHops measures TEXT frames per second through chains of 1 and 3
// wrappers ("polyweave") against bare protoactor forwarding actors over
// the same number of hops ("protoactor"). Report polyweave/protoactor as the
// ratio (goal ≥ 0.75 of bare protoactor's throughput); cpu-ns/frame is the
// process's CPU time per frame, steadier than wall time on a loaded machine.
func BenchmarkHops(b *testing.B) {
	for _, wrappers := range []int{1, 3} {
		hops := 2*wrappers + 1
		b.Run(fmt.Sprintf("wrappers=%d/protoactor", wrappers), func(b *testing.B) { benchBareHops(b, hops) })
		b.Run(fmt.Sprintf("wrappers=%d/polyweave", wrappers), func(b *testing.B) { benchWrapperHops(b, wrappers) })
	}
}
