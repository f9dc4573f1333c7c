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
	hosts := []string{fmt.Sprintf("127.0.0.1:%d", closedPort(t))} // no host up, nor one that comes up
	client := startMember(t, &cluster.Options{Client: true, Store: openStore(t, freshSchema()), Hold: 200 * time.Millisecond,
		Provider: cluster.Automanaged(0, hosts, 100*time.Millisecond)})
	runRefusedAtOnce(t, client, 5*time.Second, "bad\xffid", durability.ErrInvalidName, "of a session id that is not UTF-8, from a client,")
}

// startOneRoundMember starts a lone member on store whose sessions make
// one append call.
func startOneRoundMember(t *testing.T, store *pgstore.Store) *cluster.Member {
	t.Helper()
	return startLoneMember(t, &cluster.Options{Store: store, Session: sessionFunc(t, 1, newSideFile(t), nil), Hold: 200 * time.Millisecond})
}

// runRefusedAtOnce runs session id on m and fails t unless Run fails
// before its ctx (of wait) ends, with an error wrapping want. what says
// which Run it is, in the messages.
func runRefusedAtOnce(t *testing.T, m *cluster.Member, wait time.Duration, id string, want error, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_, err := m.Run(ctx, id, firstRequest("x")...)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run %s was still asking again when its ctx ended: %.300v", what, err)
	}
	if !errors.Is(err, want) {
		t.Fatalf("Run %s: %.300v; want an error wrapping %v", what, err, want)
	}
}

// TestRun_SessionIDOverMaxNameLenSaysInvalid: a session id longer than the
// store's MaxNameLen (1024 bytes) can be neither claimed nor stored. Run
// refuses it at once, with an error that says the id is invalid (not
// "duplex stopped"), and the store holds no claim for it.
func TestRun_SessionIDOverMaxNameLenSaysInvalid(t *testing.T) {
	leakCheck(t)
	store := openStore(t, freshSchema())
	m := startOneRoundMember(t, store)
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
	// The store holds no claim for it: it refuses the id's epoch, as it
	// refuses its claim.
	if epoch, err := store.Epoch(ctx, id); !errors.Is(err, durability.ErrInvalidName) {
		t.Errorf("the session id's epoch: %d, %v; want the store to refuse the id (%v)", epoch, err, durability.ErrInvalidName)
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
	m := startOneRoundMember(t, store)
	// 3000 bytes that PostgreSQL cannot compress below the index limit.
	var b strings.Builder
	for i := 0; b.Len() < 3000; i++ {
		fmt.Fprintf(&b, "%x", uint64(i)*0x9e3779b97f4a7c15)
	}
	id := b.String()
	runRefusedAtOnce(t, m, 10*time.Second, id, durability.ErrInvalidName, fmt.Sprintf("of a session id of %d bytes", len(id)))
}

// TestRun_ClosedStoreFailsAtOnce: a member whose store was closed can
// never claim a session (durability.ErrClosed is permanent): Run fails at
// once with an error wrapping it, instead of asking again until ctx ends.
func TestRun_ClosedStoreFailsAtOnce(t *testing.T) {
	leakCheck(t)
	store := openStore(t, freshSchema())
	m := startOneRoundMember(t, store)
	store.Close()
	runRefusedAtOnce(t, m, 5*time.Second, "s", durability.ErrClosed, "on a member whose store is closed")
}
