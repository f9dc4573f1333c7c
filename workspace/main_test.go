package workspace

import (
	"os"
	"testing"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
)

func TestMain(m *testing.M) {
	if code, ok := runAsHost(); ok {
		// This process is the host of one hostile command (see
		// hostile_test.go), not a test run.
		os.Exit(code)
	}
	leakcheck.VerifyTestMain(m)
}
