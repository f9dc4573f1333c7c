package main

import "testing"

// BenchmarkTracing plays the figure 7 (a) conversation untraced, traced
// (spans into the SDK's in-memory exporter through its batch or its
// simple span processor) and through a Telemetry with tracing off;
// compare ns/op and allocs/op of the four in one run.
func BenchmarkTracing(b *testing.B) {
	b.Run("untraced", benchUntraced)
	b.Run("traced", benchTracingBatch)
	b.Run("traced-simple", benchTracingSync)
	b.Run("off", benchTracingOff)
}
