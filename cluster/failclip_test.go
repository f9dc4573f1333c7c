package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/cluster"
	"github.com/polyweave/polyweave-go/remote"
	"github.com/polyweave/polyweave-go/tools"
)

// TestRun_LongFailureIsClippedNotTooLarge: a session that fails with an
// error whose text is over its member's frame limit still fails Run as a
// failed session (wrapping cluster.ErrSessionFailed, not
// remote.ErrTooLarge), with the beginning of its own error: the answer
// that carries a failure is clipped to fit the frame, never replaced by a
// size error.
func TestRun_LongFailureIsClippedNotTooLarge(t *testing.T) {
	leakCheck(t)
	const maxFrame = 64 << 10
	long := "the model refuses: " + strings.Repeat("why ", maxFrame/2)
	m := startLoneMember(t, &cluster.Options{
		Store: openStore(t, freshSchema()),
		Session: func(string) (actors.Spec, *tools.LoopOptions, error) {
			return actors.Spec{}, nil, errors.New(long)
		},
		Hold:          200 * time.Millisecond,
		MaxFrameBytes: maxFrame,
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := m.Run(ctx, "s", firstRequest("s")...)
	if !errors.Is(err, cluster.ErrSessionFailed) || errors.Is(err, remote.ErrTooLarge) {
		t.Fatalf("Run of a session failing with an error of %d bytes: %.300v; want an error wrapping cluster.ErrSessionFailed, not remote.ErrTooLarge", len(long), err)
	}
	if !strings.Contains(err.Error(), "the model refuses: why why") {
		t.Errorf("Run's error %.300v: want the beginning of the session's own error", err)
	}
	if n := len(err.Error()); n >= len(long) || n > maxFrame {
		t.Errorf("Run's error is %d bytes: want it clipped below the frame limit of %d", n, maxFrame)
	}
	if e := err.Error(); !strings.Contains(e, fmt.Sprintf("frame limit of %d", maxFrame)) || !strings.Contains(e, "bytes in all") {
		t.Errorf("Run's error ends %q: want it to say that it was clipped to the frame limit, and its full length", e[max(0, len(e)-200):])
	}
}
