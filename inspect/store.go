package inspect

import (
	"context"
	"strings"
	"time"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/tools"
)

// Store returns s with its writes observed: the inspector shows, per
// persisted name, the last index made durable and when, in the detail
// of its session: an agent's session, persisted under agent.SessionKey
// of the agent's name and the session id, or the session of that id (a
// tool loop's session id); a name of no session kept is listed alone. Every call
// goes to s unchanged. The store returned implements the optional
// interfaces of package durability that s implements, and only those
// (durability.Salvager: a salvage shows the position it leaves).
func (in *Inspector) Store(s durability.Store) durability.Store {
	o := &observedStore{Store: s, in: in}
	if sv, ok := s.(durability.Salvager); ok {
		return &observedSalvager{observedStore: o, salvager: sv}
	}
	return o
}

// storePosition is the durability position of one name.
type storePosition struct {
	Index uint64
	Kind  string // "event", "snapshot" or "salvaged"
	At    time.Time
}

type observedStore struct {
	durability.Store
	in *Inspector
}

func (s *observedStore) note(name string, index uint64, kind string) {
	if strings.HasSuffix(name, tools.ApprovalStoreSuffix) {
		return // the record of a session's calls held for approval: no session's position
	}
	s.in.lock()
	if _, ok := s.in.stores[name]; !ok {
		s.in.storeOrder.push(name)
	}
	s.in.stores[name] = storePosition{Index: index, Kind: kind, At: s.in.clock.now()}
	s.in.forget(nil)
	s.in.mu.Unlock()
	s.in.changed()
}

func (s *observedStore) PersistEvent(ctx context.Context, name string, index uint64, data []byte) error {
	err := s.Store.PersistEvent(ctx, name, index, data)
	if err == nil {
		s.note(name, index, "event")
	}
	return err
}

func (s *observedStore) PersistEvents(ctx context.Context, name string, first uint64, data [][]byte) error {
	err := s.Store.PersistEvents(ctx, name, first, data)
	if err == nil && len(data) > 0 {
		s.note(name, first+uint64(len(data))-1, "event")
	}
	return err
}

func (s *observedStore) PersistSnapshot(ctx context.Context, name string, index uint64, data []byte) error {
	err := s.Store.PersistSnapshot(ctx, name, index, data)
	if err == nil {
		s.note(name, index, "snapshot")
	}
	return err
}

// observedSalvager is the observed store of a durability.Salvager.
type observedSalvager struct {
	*observedStore
	salvager durability.Salvager
}

// Salvage implements durability.Salvager: what the salvage kept is the
// name's position.
func (s *observedSalvager) Salvage(ctx context.Context, name string) (durability.Salvaged, error) {
	got, err := s.salvager.Salvage(ctx, name)
	if err != nil || got.Dropped == 0 {
		return got, err
	}
	switch {
	case got.Events > 0:
		s.note(name, got.From+uint64(got.Events)-1, "event")
	case got.Snapshot:
		s.note(name, got.SnapshotIndex, "snapshot")
	default:
		s.note(name, 0, "salvaged") // nothing kept
	}
	return got, nil
}
