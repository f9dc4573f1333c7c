package agent_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/models/scripted"
)

// brokenStore fails the calls about one name for good, as a store does
// that refuses the caller (readOnly: its writes) or whose record of it is
// damaged (damaged: its reads).
type brokenStore struct {
	durability.Store
	name     string
	readOnly atomic.Bool
	damaged  atomic.Bool
}

var errReadOnly = durability.Permanent(errors.New("injected: the database is read-only"))

func (s *brokenStore) write(name string) error {
	if name == s.name && s.readOnly.Load() {
		return errReadOnly
	}
	return nil
}

func (s *brokenStore) read(name string) error {
	if name == s.name && s.damaged.Load() {
		return &durability.StoreError{Op: durability.OpGetEvents, Name: name,
			Err: &durability.DamageError{Store: "broken", What: "event", Offset: -1, Reason: "injected: checksum mismatch"}}
	}
	return nil
}

func (s *brokenStore) PersistEvent(ctx context.Context, name string, index uint64, data []byte) error {
	if err := s.write(name); err != nil {
		return err
	}
	return s.Store.PersistEvent(ctx, name, index, data)
}

func (s *brokenStore) PersistEvents(ctx context.Context, name string, first uint64, data [][]byte) error {
	if err := s.write(name); err != nil {
		return err
	}
	return s.Store.PersistEvents(ctx, name, first, data)
}

func (s *brokenStore) PersistSnapshot(ctx context.Context, name string, index uint64, data []byte) error {
	if err := s.write(name); err != nil {
		return err
	}
	return s.Store.PersistSnapshot(ctx, name, index, data)
}

func (s *brokenStore) GetSnapshot(ctx context.Context, name string) (durability.Snapshot, bool, error) {
	if err := s.read(name); err != nil {
		return durability.Snapshot{}, false, err
	}
	return s.Store.GetSnapshot(ctx, name)
}

func (s *brokenStore) GetEvents(ctx context.Context, name string, from, max uint64, fn func(uint64, []byte) error) error {
	if err := s.read(name); err != nil {
		return err
	}
	return s.Store.GetEvents(ctx, name, from, max, fn)
}

func newBrokenStore(t *testing.T, session string) *brokenStore {
	mem := memstore.New(nil)
	t.Cleanup(func() { mem.Close() })
	return &brokenStore{Store: mem, name: agent.SessionKey("broken", session)}
}

// permanentFailure checks that err is a *FailedError after one attempt
// and no restart, whose cause is ErrPermanent and the store's error
// (durability.IsPermanent, saying why).
func permanentFailure(t *testing.T, n int, err error, why string) {
	t.Helper()
	var failed *agent.FailedError
	if !errors.As(err, &failed) || failed.Attempts != 1 || n != 0 || !errors.Is(err, agent.ErrPermanent) ||
		!durability.IsPermanent(err) || !strings.Contains(err.Error(), why) {
		t.Fatalf("%v after %d restarts: want a FailedError after one attempt, its cause ErrPermanent and the store's error saying %q", err, n, why)
	}
}

// TestRun_PermanentStoreWriteFailureIsNotRetried: a durable session whose
// store refuses its writes for good (durability.Permanent: a read-only
// database) fails its loop at the first write; another attempt would
// meet the same. The Run gives up at once with a FailedError whose cause
// is ErrPermanent and the store's error.
func TestRun_PermanentStoreWriteFailureIsNotRetried(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	store := newBrokenStore(t, "s")
	store.readOnly.Store(true)
	a := newAgent(t, rt, model(t, scripted.Turn{Text: "Hi."}), &agent.Options{Name: "broken", Store: store})
	n, err := restarts(a.Stream(testCtx(t), "s", ask))
	permanentFailure(t, n, err, "read-only")
}

// TestRun_DamagedStoreIsNotResumed: a durable session's first attempt
// fails (the model is overloaded), and its record is then found damaged:
// it cannot be resumed, whatever the attempts left. The Run gives up at
// once with a FailedError whose cause is ErrPermanent and the damage
// (errors.Is durability.ErrDamaged).
func TestRun_DamagedStoreIsNotResumed(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	store := newBrokenStore(t, "s")
	m := scripted.MustNew(scripted.Script{Turns: []scripted.Turn{{Error: "overloaded"}, {Text: "Hi."}}}, nil)
	a := newAgent(t, rt, m.Spec("model"), &agent.Options{Name: "broken", Store: store})
	n := 0
	var err error
	for ev, e := range a.Stream(testCtx(t), "s", ask) {
		switch ev.Kind {
		case agent.EventError:
			store.damaged.Store(true) // found damaged as the attempt fails
		case agent.EventRestart:
			n++
		}
		err = e
	}
	permanentFailure(t, n, err, "checksum mismatch")
	if !errors.Is(err, durability.ErrDamaged) {
		t.Fatalf("%v: want the damage (durability.ErrDamaged)", err)
	}
}
