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
