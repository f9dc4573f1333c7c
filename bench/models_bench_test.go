package main

import "testing"

// BenchmarkScriptedTurn measures request/response turns per second through
// the scripted adapter ("scripted": PARAM + END in, the 15 frames of
// modelTurn out) against a duplex that answers END with the same 15
// prebuilt frames ("baseline").
func BenchmarkScriptedTurn(b *testing.B) {
	scripted, baseline := scriptedTurnSpecs(b)
	b.Run("baseline", func(b *testing.B) { benchModelTurns(b, baseline) })
	b.Run("scripted", func(b *testing.B) { benchModelTurns(b, scripted) })
}

// BenchmarkOpenAIAccumulator measures streamed chunks per second decoded
// into the SDK's chunk type and folded into an Accumulator ("accumulate")
// against decoding alone ("decode"): the ratio is the accumulator's share
// of reading a stream.
func BenchmarkOpenAIAccumulator(b *testing.B) {
	chunks := openAIChunks()
	b.Run("decode", func(b *testing.B) { benchOpenAIAccumulator(b, chunks, false) })
	b.Run("accumulate", func(b *testing.B) { benchOpenAIAccumulator(b, chunks, true) })
}
