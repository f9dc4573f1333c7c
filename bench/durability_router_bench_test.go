package main

import "testing"

// BenchmarkRouterChunks reports argument chunks per second through the
// streaming router, durability off, in memory and on bbolt.
func BenchmarkRouterChunks(b *testing.B) {
	b.Run("off/streams=1", func(b *testing.B) { benchRouterChunks(b, durabilityOff, 1) })
	b.Run("memstore/streams=1", func(b *testing.B) { benchRouterChunks(b, durabilityMem, 1) })
	b.Run("bolt/streams=1", func(b *testing.B) { benchRouterChunks(b, durabilityBolt, 1) })
	b.Run("off/streams=64", func(b *testing.B) { benchRouterChunks(b, durabilityOff, 64) })
	b.Run("bolt/streams=64", func(b *testing.B) { benchRouterChunks(b, durabilityBolt, 64) })
}

// BenchmarkRouterRecovery reports the time for a durable router on bbolt
// to recover 10 000 pending calls.
func BenchmarkRouterRecovery(b *testing.B) { benchRouterRecovery(b) }

// BenchmarkRouterMemVsOff runs figure 4's interleaved in-memory-vs-off
// run as a plain benchmark (b.N pairs of turns) and reports each side's
// chunks per second of wall time and their ratio.
func BenchmarkRouterMemVsOff(b *testing.B) {
	t := routerMemVsOff(b, 0)
	mem := float64(t.items[0]) / t.wall[0].Seconds()
	off := float64(t.items[1]) / t.wall[1].Seconds()
	b.ReportMetric(mem, "mem-chunks/s")
	b.ReportMetric(off, "off-chunks/s")
	b.ReportMetric(mem/off, "mem/off")
}
