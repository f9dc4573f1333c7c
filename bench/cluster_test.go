package main

import (
	"os"
	"testing"
)

// TestMain lets the test binary serve as a round-trip peer of figure 8, as
// the bench binary does.
func TestMain(m *testing.M) {
	if servePeer() {
		return
	}
	os.Exit(m.Run())
}
