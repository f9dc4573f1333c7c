package main

import "testing"

// BenchmarkMCPServer measures tools/call of a no-op tool over the
// go-sdk's in-memory transport, through mcp.NewServer ("polyweave": a
// TOOL_CALL through the router, the tool Sync or on its tool actor) and
// through the go-sdk's own server ("go-sdk"). Figure 9's goal (sync):
// ≤ 1.3×.
func BenchmarkMCPServer(b *testing.B) {
	b.Run("go-sdk", benchMCPServerSDK)
	b.Run("polyweave/sync", func(b *testing.B) { benchMCPServerOurs(b, true) })
	b.Run("polyweave/async", func(b *testing.B) { benchMCPServerOurs(b, false) })
}

// BenchmarkMCPImportedCall measures one call of a go-sdk server's no-op
// tool over streamable HTTP from the go-sdk client directly and through
// an imported tool. Figure 9's goal: ≤ 1.2×.
func BenchmarkMCPImportedCall(b *testing.B) {
	b.Run("go-sdk-client", func(b *testing.B) { benchMCPImport(b, false) })
	b.Run("imported", func(b *testing.B) { benchMCPImport(b, true) })
}
