// Package leakcheck fails a test that leaves goroutines behind, as goleak
// does, with the patience a loaded machine needs.
//
// goleak retries for about half a second before it reports a goroutine.
// Under the race detector, on two busy cores, a goroutine that is already
// on its way out (a timer the pinned protoactor starts for a second, a
// connection's reader that sees its socket close) can take longer than
// that, and a check that fails then is noise, not a leak. The functions
// here keep asking goleak for up to Patience: a goroutine that never
// ends is still reported, one that ends in time is not.
package leakcheck

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Patience is how long Find waits, at most, for goroutines to end.
const Patience = 5 * time.Second

// Find returns goleak's report of the goroutines that opts do not
// ignore and that are still running after up to Patience, nil as soon as
// there are none.
func Find(opts ...goleak.Option) error {
	return findWithin(Patience, opts)
}

// findWithin is Find with the patience given.
func findWithin(patience time.Duration, opts []goleak.Option) error {
	deadline := time.Now().Add(patience)
	for {
		// goleak.Find retries for about half a second itself.
		err := goleak.Find(opts...)
		if err == nil || !time.Now().Before(deadline) {
			return err
		}
	}
}

// VerifyNone fails t when Find reports goroutines. Use it as
// goleak.VerifyNone, typically deferred or in a cleanup with
// goleak.IgnoreCurrent() taken at the test's start.
func VerifyNone(t testing.TB, opts ...goleak.Option) {
	t.Helper()
	verifyWithin(t, Patience, opts)
}

// verifyWithin is VerifyNone with the patience given.
func verifyWithin(t testing.TB, patience time.Duration, opts []goleak.Option) {
	t.Helper()
	if err := findWithin(patience, opts); err != nil {
		t.Error(err)
	}
}

// VerifyTestMain runs m's tests and, when they pass, fails the binary if
// Find reports goroutines left behind. Call it from TestMain, as
// goleak.VerifyTestMain.
func VerifyTestMain(m *testing.M, opts ...goleak.Option) {
	code := m.Run()
	if code == 0 {
		if err := Find(opts...); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left behind after the tests passed:", err)
			code = 1
		}
	}
	os.Exit(code)
}
