package main

import "testing"

// BenchmarkTracing plays the figure 7 (a) conversation untraced, traced
// (spans into the SDK's in-memory exporter) and through a Telemetry with
// tracing off; compare ns/op and allocs/op of the three in one run.
func BenchmarkTracing(b *testing.B) {
	b.Run("untraced", benchUntraced)
	b.Run("traced", benchTracingOn)
	b.Run("off", benchTracingOff)
}
