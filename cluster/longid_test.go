package cluster_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/cluster"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/tools"
)

// TestIncarnation_LongestIDResumes: a session with the longest id Run
// accepts is resumed by a second incarnation while its first call runs.
// The resume reads the record of the session's calls held for approval,
// kept under its id and tools.ApprovalStoreSuffix: a name the store must
// hold too (with an id of pgstore.MaxNameLen bytes it could not, and the
// resumed session failed). One byte longer is refused before anything
// is claimed.
func TestIncarnation_LongestIDResumes(t *testing.T) {
	leakCheck(t)
	store := openStore(t, freshSchema())
	side := newSideFile(t)
	id := strings.Repeat("s", cluster.MaxSessionIDLen)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fn, release, first := stalledIncarnation(ctx, t, store, side, id)
	state, text, epoch := cluster.RunIncarnation(ctx, newRuntime(t), store, fn, id, firstRequest(id)...)
	release()
	<-first
	if state != "done" || text != "All done." || epoch != 2 {
		t.Fatalf("the second incarnation of a %d-byte id: %s %.200q epoch %d, want done \"All done.\" epoch 2", len(id), state, text, epoch)
	}

	longer := id + "s"
	state, text, _ = cluster.RunIncarnation(ctx, newRuntime(t), store, fn, longer, firstRequest(longer)...)
	if state != "refused" || !strings.Contains(text, durability.ErrInvalidName.Error()) {
		t.Errorf("an id of %d bytes: %s %.200q, want refused as %q", len(longer), state, text, durability.ErrInvalidName)
	}
	if e, err := store.Epoch(ctx, longer); err != nil && !errors.Is(err, durability.ErrInvalidName) || e != 0 {
		t.Errorf("epoch of the refused id: %d, %v; want nothing claimed", e, err)
	}
}

// TestRun_LongIDShortInErrors: the errors of a Run of a long session id
// (here one whose loop cannot be built) quote the id cut short, not all
// of its bytes, wherever they name it.
func TestRun_LongIDShortInErrors(t *testing.T) {
	leakCheck(t)
	m := startLoneMember(t, &cluster.Options{
		Store: openStore(t, freshSchema()),
		Session: func(string) (actors.Spec, *tools.LoopOptions, error) {
			return actors.Spec{}, nil, errors.New("no model for it")
		},
		Hold: 200 * time.Millisecond,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id := strings.Repeat("s", cluster.MaxSessionIDLen)
	_, err := m.Run(ctx, id, firstRequest("x")...)
	if !errors.Is(err, cluster.ErrSessionFailed) || !strings.Contains(err.Error(), "no model for it") {
		t.Fatalf("Run: %.300v; want the session failed with its cause", err)
	}
	if msg := err.Error(); strings.Contains(msg, id) || len(msg) > 600 {
		t.Errorf("Run's error quotes the %d-byte id whole (%d bytes): %.300s…", len(id), len(msg), msg)
	}
}
