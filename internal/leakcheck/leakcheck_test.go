package leakcheck

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { VerifyTestMain(m) }

// A goroutine that ends after goleak's own half second of retries, but
// well within the patience, is not reported.
func TestFindWaitsForGoroutineOnItsWayOut(t *testing.T) {
	before := goleak.IgnoreCurrent()
	done := make(chan struct{})
	go func() {
		<-time.After(time.Second)
		close(done)
	}()
	if err := findWithin(3*time.Second, []goleak.Option{before}); err != nil {
		t.Fatalf("goroutine that ends after 1 s reported: %v", err)
	}
	<-done
}

// A goroutine that does not end within the patience is reported, and
// Find returns once the patience is spent.
func TestFindReportsGoroutineThatStays(t *testing.T) {
	before := goleak.IgnoreCurrent()
	release := stay()
	start := time.Now()
	err := findWithin(time.Second, []goleak.Option{before})
	release()
	if err == nil {
		t.Fatal("goroutine blocked on a channel not reported")
	}
	if !strings.Contains(err.Error(), "leakcheck.stay") {
		t.Errorf("report does not name the goroutine's creator: %v", err)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Errorf("reported after %v, before the patience of 1 s was spent", waited)
	}
}

// VerifyNone (with a shorter patience) fails the test it is given when a goroutine stays.
func TestVerifyNoneFailsTest(t *testing.T) {
	before := goleak.IgnoreCurrent()
	release := stay()
	rec := &recorder{TB: t}
	verifyWithin(rec, time.Second, []goleak.Option{before})
	release()
	if !rec.failed {
		t.Fatal("VerifyNone did not fail the test while a goroutine stayed")
	}
}

// recorder is a testing.TB that records a failure instead of failing.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Error(...any) { r.failed = true }
func (r *recorder) Helper()      {}

// stay starts a goroutine that stays until the function returned is
// called, which returns once it has ended.
func stay() (release func()) {
	ch := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ch
	}()
	return func() {
		close(ch)
		<-stopped
	}
}
