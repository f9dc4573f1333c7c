package main

import (
	"testing"
)

// BenchmarkToolCallRoundTrip measures one tool call, TOOL_CALL emitted by
// the model → TOOL_RESULT in the model's sink, with a no-op tool.
//
//   - pingpong/*: self-driving (the model emits its next call as soon as
//     it has a result) through a router, sync (run inline: 2 hops), async
//     (on the tool actor) and sync with arguments validated against a
//     schema, against a bare protoactor ping-pong of two actors
//     ("pingpong/protoactor"): the figure-2 ratio.
//   - driven/*: one call per Send from outside, against a bare
//     RequestFuture ("protoactor"), the router's topology in bare
//     protoactor ("protoactor-same-hops") and the tool duplex alone.
func BenchmarkToolCallRoundTrip(b *testing.B) {
	b.Run("pingpong/protoactor", benchBarePingPong)
	b.Run("pingpong/router/sync", func(b *testing.B) { benchRouterPingPong(b, true, false) })
	b.Run("pingpong/router/async", func(b *testing.B) { benchRouterPingPong(b, false, false) })
	b.Run("pingpong/router-validated/sync", func(b *testing.B) { benchRouterPingPong(b, true, true) })
	b.Run("driven/protoactor", benchRequestFuture)
	b.Run("driven/protoactor-same-hops", benchBareSameHops)
	for _, sync := range []bool{true, false} {
		mode := map[bool]string{true: "sync", false: "async"}[sync]
		b.Run("driven/tool-duplex/"+mode, func(b *testing.B) { benchToolDuplex(b, sync) })
		b.Run("driven/router/"+mode, func(b *testing.B) { benchRouterDriven(b, sync, false) })
		b.Run("driven/router-validated/"+mode, func(b *testing.B) { benchRouterDriven(b, sync, true) })
	}
}

// BenchmarkToolCallParallel measures tool-call throughput with 8
// concurrent sessions (a router and model each), calls one after the other
// within a session, against 8 concurrent bare protoactor request/respond
// loops and 8 bare sessions of the same topology.
func BenchmarkToolCallParallel(b *testing.B) {
	b.Run("protoactor", benchParallelRequestFuture)
	b.Run("protoactor-same-hops", benchParallelBareSameHops)
	b.Run("router/sync", func(b *testing.B) { benchParallelRouters(b, true) })
	b.Run("router/async", func(b *testing.B) { benchParallelRouters(b, false) })
}
