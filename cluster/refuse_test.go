package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/cluster"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/pgstore"
)

// TestRun_SessionIDNotUTF8FromClientFailsAtOnce: a session id that is
// not valid UTF-8 cannot cross protoactor remote (protobuf strings must be
// UTF-8): its activation request is never delivered, and a Run from any
// process other than the session's owner asked again until its ctx ended
// ("no activation of the session"). Run checks the id before it sends
// anything, and refuses it at once: here on a client whose cluster has no
// host up (one in-process gRPC server only: the pinned protoactor's
// remote sets grpc's global logger, racing with another server).
func TestRun_SessionIDNotUTF8FromClientFailsAtOnce(t *testing.T) {
	leakCheck(t)
	hosts := []string{fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])}
	client, err := cluster.Start(&cluster.Options{Client: true, Store: openStore(t, freshSchema()), Hold: 200 * time.Millisecond,
		Provider: cluster.Automanaged(0, hosts, 100*time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := client.Close(ctx); err != nil {
			t.Errorf("close client: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = client.Run(ctx, "bad\xffid", firstRequest("x")...)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run of a session id that is not UTF-8, from a client, was still asking again when its ctx ended: %v", err)
	}
	if !errors.Is(err, durability.ErrInvalidName) {
		t.Fatalf("Run of a session id that is not UTF-8: %v; want an error wrapping durability.ErrInvalidName", err)
	}
}

// TestRun_SessionIDOverMaxNameLenSaysInvalid: a session id longer than the
// store's MaxNameLen (1024 bytes) could be claimed (the epoch raised) but
// never stored. Run refuses it at once, claiming nothing, with an error
// that says the id is invalid (not "duplex stopped").
func TestRun_SessionIDOverMaxNameLenSaysInvalid(t *testing.T) {
	leakCheck(t)
	store := openStore(t, freshSchema())
	m := startLoneMember(t, &cluster.Options{Store: store, Session: sessionFunc(t, 1, newSideFile(t), nil), Hold: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id := strings.Repeat("a", pgstore.MaxNameLen+1)
	_, err := m.Run(ctx, id, firstRequest("x")...)
	if err == nil {
		t.Fatal("Run of a session id over MaxNameLen succeeded")
	}
	if !errors.Is(err, durability.ErrInvalidName) || !strings.Contains(err.Error(), durability.ErrInvalidName.Error()) {
		t.Errorf("Run of a session id of %d bytes: %.300v; want an error that says the id is invalid (%q)", len(id), err, durability.ErrInvalidName)
	}
	if epoch, err := store.Epoch(ctx, id); err != nil || epoch != 0 {
		t.Errorf("the session id's epoch is %d (%v), want 0: nothing claimed", epoch, err)
	}
}

// TestRun_SessionIDTooLongForTheKeyIndexFailsAtOnce: a session id whose bytes do not fit
// the fences table's primary-key index (PostgreSQL refuses index rows over
// 2704 bytes) can never be claimed; the store refuses the claim with the
// same permanent error each time. Run refuses it at once (it is longer
// than pgstore.MaxNameLen) instead of asking again until its ctx ends.
func TestRun_SessionIDTooLongForTheKeyIndexFailsAtOnce(t *testing.T) {
	leakCheck(t)
	store := openStore(t, freshSchema())
	m := startLoneMember(t, &cluster.Options{
		Store:   store,
		Session: sessionFunc(t, 1, newSideFile(t), nil),
		Hold:    200 * time.Millisecond,
	})
	// 3000 bytes that PostgreSQL cannot compress below the index limit.
	var b strings.Builder
	for i := 0; b.Len() < 3000; i++ {
		fmt.Fprintf(&b, "%x", uint64(i)*0x9e3779b97f4a7c15)
	}
	id := b.String()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := m.Run(ctx, id, firstRequest("x")...)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run of a session id of %d bytes was still asking again when its ctx ended: %.300v", len(id), err)
	}
	if !errors.Is(err, durability.ErrInvalidName) {
		t.Fatalf("Run of a session id of %d bytes: %.300v; want an error wrapping durability.ErrInvalidName", len(id), err)
	}
}

// TestRun_ClosedStoreFailsAtOnce: a member whose store was closed can
// never claim a session (durability.ErrClosed is permanent): Run fails at
// once with an error wrapping it, instead of asking again until ctx ends.
func TestRun_ClosedStoreFailsAtOnce(t *testing.T) {
	leakCheck(t)
	store := openStore(t, freshSchema())
	m := startLoneMember(t, &cluster.Options{
		Store:   store,
		Session: sessionFunc(t, 1, newSideFile(t), nil),
		Hold:    200 * time.Millisecond,
	})
	store.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := m.Run(ctx, "s", firstRequest("s")...)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run on a member whose store is closed was still asking again when its ctx ended: %v", err)
	}
	if !errors.Is(err, durability.ErrClosed) {
		t.Fatalf("Run on a member whose store is closed: %v; want an error wrapping durability.ErrClosed", err)
	}
}
