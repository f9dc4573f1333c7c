//go:build race

package main

// buildDemo names no package to build under the race detector: the
// tests that run the demo binary are left out there (see e2e_test.go).
func buildDemo(string) string { return "" }
