package pgstore_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/durability/pgstore"
)

// TestDeadNetwork_RerunBounded: a write whose connection was lost after
// its transaction was sent, with the network then dead (new connections
// reach nothing that answers), and whose caller set no deadline, does not
// wait for ever to learn whether the first run has ended: it fails,
// saying that its outcome is unknown and that the server could not tell,
// and frees its committer. Once the network is back, the doubt settles and
// a read tells.
func TestDeadNetwork_RerunBounded(t *testing.T) {
	ctx := t.Context() // no deadline
	s, p := storeVia(t, &pgstore.Options{Committers: 1})
	if err := s.PersistEvent(ctx, "a", 0, []byte("old")); err != nil {
		t.Fatal(err)
	}
	hit := p.arm(cutRequest)
	p.stall(true)
	errc := make(chan error, 1)
	go func() { errc <- s.PersistEvent(ctx, "a", 0, []byte("new")) }()
	<-hit
	var err error
	select {
	case err = <-errc:
	case <-time.After(guard):
		t.Fatalf("a write lost with the network dead, its caller without a deadline, still waits after %v", guard)
	}
	if !errors.Is(err, pgstore.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "ended") {
		t.Fatalf("write lost with the network dead: %v; want ErrOutcomeUnknown saying whether its transaction ended could not be learned", err)
	}
	// The committer is free: another actor's write goes through once the
	// network is back.
	p.stall(false)
	if err := s.PersistEvent(ctx, "b", 0, []byte("b")); err != nil {
		t.Fatalf("write of another actor once the network is back: %v", err)
	}
	if got := stored(t, s, "a"); !slices.Equal(got, []string{"0:old"}) {
		t.Errorf("a holds %q once the network is back, want [0:old] (the lost write never reached the server)", got)
	}
}
