package main

import "testing"

// BenchmarkConversation plays the peers' 3-tool-call conversation: our
// tool loop around the scripted adapter (tools sync and async) against a
// plain Go loop calling the same functions directly ("floor"). Full loop
// iterations per second with allocations (issue 6); the peers themselves
// run with `go run ./bench -filter '^7'`.
func BenchmarkConversation(b *testing.B) {
	b.Run("floor", benchFloorConversation)
	b.Run("loop/sync", func(b *testing.B) { benchLoopConversation(b, true) })
	b.Run("loop/async", func(b *testing.B) { benchLoopConversation(b, false) })
	b.Run("loop/streaming", benchStreamingConversation)
}

// BenchmarkAgent plays the same conversation through agent.Run: one agent
// (runs one after the other), against the raw loop played by hand as a
// host would (the baseline of the agent.Run row), and 1000 agents answering at once (runs/s
// over all agents), the bodies of figure 7's agent rows.
func BenchmarkAgent(b *testing.B) {
	b.Run("one", func(b *testing.B) { benchAgentConversation(b, true) })
	b.Run("raw-loop-by-hand", benchLoopByHand)
	b.Run("fleet-1000", func(b *testing.B) { benchAgentFleet(b, 1000) })
}

// BenchmarkSessions plays the conversation on 1000 raw-loop sessions of
// one runtime at once and on one at a time (runs/s, runs per CPU second,
// p99 latency as p99-runs/s), the bodies of figure 7's sessions rows.
func BenchmarkSessions(b *testing.B) {
	b.Run("one", func(b *testing.B) { benchSessionFleet(b, 1) })
	b.Run("fleet-1000", func(b *testing.B) { benchSessionFleet(b, 1000) })
}
