//go:build unix

package browser_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/internal/browser"
	"github.com/polyweave/polyweave-go/internal/leakcheck"
)

// TestLaunch_LeavesNothingBehind: a browser that was launched, used and
// closed leaves no process, no goroutine and nothing in the temporary
// folder: Chromium's own temporary files (its singleton socket's folder)
// go into the profile folder that Close removes.
func TestLaunch_LeavesNothingBehind(t *testing.T) {
	defer leakcheck.VerifyNone(t)
	chromium, err := browser.Find(true)
	if err != nil {
		t.Skipf("headless Chromium is needed and could not be installed (scripts/chromium.sh): %v", err)
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := browser.Launch(ctx, chromium, 640, 480)
	if err != nil {
		t.Fatal(err)
	}
	var two int
	if err := b.Eval(ctx, "1+1", &two); err != nil || two != 2 {
		b.Close()
		t.Fatalf("1+1 in the page: %d, %v", two, err)
	}
	b.Close()
	entries, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("left in TMPDIR after Close: %s", e.Name())
	}
}
