package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/models/scripted"
)

// buildDir is TestMain's temporary folder, for the binaries the tests
// build; TestMain removes it once they have run.
var buildDir string

// TestMain builds the demo into a temporary folder for the tests that run
// the binary, runs the tests and checks that the in-process ones left no
// goroutine behind.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "demo-e2e-")
	buildDir = dir
	if err != nil {
		fmt.Fprintln(os.Stderr, "make build folder:", err)
		os.Exit(1)
	}
	if err := buildDemo(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		if err := leakcheck.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left behind:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// scriptTurns is the embedded script, for a fake server to play.
func scriptTurns(t *testing.T) []scripted.Turn {
	t.Helper()
	script, err := loadScript(defaultScript)
	if err != nil {
		t.Fatal(err)
	}
	return script.Turns
}
