package main

import "testing"

// BenchmarkInspected is figure 7 (a) with the inspector mounted and one
// event stream client ("inspected") and without ("without").
func BenchmarkInspected(b *testing.B) {
	b.Run("inspected", benchInspected)
	b.Run("without", benchUninspected)
}
