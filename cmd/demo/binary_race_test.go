//go:build race

package main

// buildDemo builds nothing under the race detector: the tests that run
// the demo binary are left out there (see e2e_test.go).
func buildDemo(string) error { return nil }
