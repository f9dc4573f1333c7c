package durability_test

import (
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/persistence"
	bolterrors "go.etcd.io/bbolt/errors"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/boltstore"
	"github.com/polyweave/polyweave-go/durability/memstore"
)

// wait bounds how long a test waits for an actor; it only matters when a
// test is failing, so that it fails instead of hanging.
const wait = 10 * time.Second

// journal is a tiny persistent actor: it appends each string event to its
// state. It persists an event before applying it, as Provider requires.
type journal struct {
	persistence.Mixin
	entries []string
}

type (
	getEntries struct{} // replies with a copy of the entries
	crash      struct{} // makes the actor panic
)

func (j *journal) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *persistence.RequestSnapshot:
		list, err := structpb.NewList(toAny(j.entries))
		if err != nil {
			panic(err)
		}
		j.PersistSnapshot(list)
	case *structpb.ListValue: // a snapshot being restored
		j.entries = j.entries[:0]
		for _, v := range m.GetValues() {
			j.entries = append(j.entries, v.GetStringValue())
		}
	case *wrapperspb.StringValue:
		// PersistReceive may run a nested Receive for RequestSnapshot,
		// which clears the context's current message: read the sender first.
		sender := ctx.Sender()
		if !j.Recovering() {
			j.PersistReceive(m) // persist first ...
		}
		j.entries = append(j.entries, m.GetValue()) // ... then apply
		if sender != nil {
			ctx.Send(sender, slices.Clone(j.entries))
		}
	case getEntries:
		ctx.Respond(slices.Clone(j.entries))
	case crash:
		panic("crash requested by the test")
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func newSystem(t *testing.T) *actor.ActorSystem {
	t.Helper()
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}), actor.WithDeadLetterThrottleInterval(10*time.Millisecond)) // its timer ends before the leak check looks
}

func journalProps(p *durability.Provider, opts ...actor.PropsOption) *actor.Props {
	opts = append(opts, actor.WithReceiverMiddleware(persistence.Using(p)))
	return actor.PropsFromProducer(func() actor.Actor { return &journal{} }, opts...)
}

func request(t *testing.T, sys *actor.ActorSystem, pid *actor.PID, msg any) []string {
	t.Helper()
	res, err := sys.Root.RequestFuture(pid, msg, wait).Result()
	if err != nil {
		t.Fatalf("request %T: %v", msg, err)
	}
	return res.([]string)
}

func stop(t *testing.T, sys *actor.ActorSystem, pid *actor.PID) {
	t.Helper()
	if err := sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatalf("stop %v: %v", pid, err)
	}
}

// TestProvider_ActorRecovers drives a real persistent actor over boltstore:
// it survives a crash (supervisor restart), then a full shutdown and a
// reopen of the file, with every event applied exactly once.
func TestProvider_ActorRecovers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	store, err := boltstore.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := newProvider(t, store, &durability.ProviderOptions{SnapshotInterval: 2})
	sys := newSystem(t)
	pid, err := sys.Root.SpawnNamed(journalProps(p), "journal")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []string{"a", "b", "c", "d", "e"} {
		request(t, sys, pid, wrapperspb.String(e))
	}
	sys.Root.Send(pid, crash{}) // the default supervisor restarts it
	if got := request(t, sys, pid, getEntries{}); !slices.Equal(got, []string{"a", "b", "c", "d", "e"}) {
		t.Errorf("after restart the journal holds %v, want [a b c d e]", got)
	}
	stop(t, sys, pid)
	sys.Shutdown()
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	// What is on disk: snapshots were requested at events 0, 2 and 4; the
	// newest holds the state before event 4 and compaction kept events 4 on.
	store, err = boltstore.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	snap, ok, err := store.GetSnapshot(t.Context(), "journal")
	if err != nil || !ok || snap.Index != 4 {
		t.Fatalf("stored snapshot = index %d, %v, %v; want index 4", snap.Index, ok, err)
	}
	var indexes []uint64
	if err := store.GetEvents(t.Context(), "journal", 0, 0, func(i uint64, _ []byte) error {
		indexes = append(indexes, i)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(indexes, []uint64{4}) {
		t.Errorf("stored events %v, want [4]", indexes)
	}

	// A new system over the reopened file recovers and goes on.
	p = newProvider(t, store, &durability.ProviderOptions{SnapshotInterval: 2})
	sys = newSystem(t)
	defer sys.Shutdown()
	pid, err = sys.Root.SpawnNamed(journalProps(p), "journal")
	if err != nil {
		t.Fatal(err)
	}
	if got := request(t, sys, pid, wrapperspb.String("f")); !slices.Equal(got, []string{"a", "b", "c", "d", "e", "f"}) {
		t.Errorf("after reopen and one more event the journal holds %v, want [a b c d e f]", got)
	}
	stop(t, sys, pid)
}

// failure is what the test's supervisor saw.
type failure struct {
	who    *actor.PID
	reason any
}

// recordingStrategy reports each failure and leaves the failed child
// suspended; the test then stops it with StopFuture, which (unlike stopping
// it here and racing the test's StopFuture) sends nothing to dead letters.
type recordingStrategy struct{ failures chan failure }

func (s recordingStrategy) HandleFailure(_ *actor.ActorSystem, _ actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics, reason, _ any) {
	s.failures <- failure{child, reason}
}

func supervisedFailure(t *testing.T, store durability.Store, send func(*actor.ActorSystem, *actor.PID)) *durability.StoreError {
	t.Helper()
	p := newProvider(t, store, &durability.ProviderOptions{SnapshotInterval: 1})
	strategy := recordingStrategy{failures: make(chan failure, 1)}
	sys := newSystem(t)
	defer sys.Shutdown()
	// A top-level actor ignores WithSupervisor; its guardian supervises it.
	pid, err := sys.Root.SpawnNamed(journalProps(p, actor.WithGuardian(strategy)), "journal")
	if err != nil {
		t.Fatal(err)
	}
	send(sys, pid)
	var f failure
	select {
	case f = <-strategy.failures:
	case <-time.After(wait):
		t.Fatal("the supervisor saw no failure")
	}
	if !f.who.Equal(pid) {
		t.Errorf("failure of %v, want %v", f.who, pid)
	}
	if err := sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	se, ok := f.reason.(*durability.StoreError)
	if !ok {
		t.Fatalf("failure reason %v (%T), want a *durability.StoreError", f.reason, f.reason)
	}
	return se
}

// TestProvider_ClosedStoreFailsRecovery: the store is closed before the
// actor starts, so recovery fails and the supervisor gets the typed error.
func TestProvider_ClosedStoreFailsRecovery(t *testing.T) {
	store := memstore.New(nil)
	store.Close()
	se := supervisedFailure(t, store, func(*actor.ActorSystem, *actor.PID) {})
	if se.Op != durability.OpGetSnapshot || se.Name != "journal" || !errors.Is(se, durability.ErrClosed) {
		t.Errorf("supervisor saw %v, want get snapshot of journal wrapping ErrClosed", se)
	}
}

// TestProvider_ReadOnlyStoreFailsPersist: recovery from a read-only file
// works, the first persist fails, and the supervisor gets the typed error
// carrying bbolt's cause; the event is not silently dropped.
func TestProvider_ReadOnlyStoreFailsPersist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ro.db")
	s, err := boltstore.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	store, err := boltstore.Open(path, &boltstore.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	se := supervisedFailure(t, store, func(sys *actor.ActorSystem, pid *actor.PID) {
		sys.Root.Send(pid, wrapperspb.String("never applied"))
	})
	if se.Op != durability.OpPersistEvent || se.Name != "journal" || !errors.Is(se, bolterrors.ErrDatabaseReadOnly) {
		t.Errorf("supervisor saw %v, want persist event of journal wrapping ErrDatabaseReadOnly", se)
	}
	if se.Retryable() {
		t.Error("a read-only failure is reported retryable")
	}
}
