package workspace

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if code, ok := runAsHost(); ok {
		// This process is the host of one hostile command (see
		// hostile_test.go), not a test run.
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}
