package main

import "testing"

// BenchmarkTracing plays the figure 7 (a) conversation untraced, traced
// (spans into the SDK's in-memory exporter through its batch or its
// simple span processor) and through a Telemetry with tracing off, and
// the SDK alone building a traced run's spans; compare allocs/op and
// runs/cpu-s in one run.
func BenchmarkTracing(b *testing.B) {
	b.Run("untraced", benchUntraced)
	b.Run("traced", benchTracingBatch)
	b.Run("traced-simple", benchTracingSync)
	b.Run("off", benchTracingOff)
	b.Run("sdk-floor", benchSDKFloor)
}
