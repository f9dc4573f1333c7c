package main

import "testing"

// BenchmarkLoopBigArg reports the time of one tool-loop conversation whose
// model streams a 1 MiB argument: without a Session, and with a resumable
// Session in memory and on bbolt.
func BenchmarkLoopBigArg(b *testing.B) {
	b.Run("off", func(b *testing.B) { benchLoopBigArg(b, nil) })
	b.Run("memstore", func(b *testing.B) { benchLoopBigArg(b, openMem) })
	b.Run("bolt", func(b *testing.B) { benchLoopBigArg(b, openBolt(nil)) })
}
