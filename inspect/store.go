package inspect

import (
	"context"
	"time"

	"github.com/polyweave/polyweave-go/durability"
)

// Store returns s with its writes observed: the inspector shows, per
// persisted name (a tool loop's session id), the last index made durable
// and when. Every call goes to s unchanged.
func (in *Inspector) Store(s durability.Store) durability.Store {
	return &observedStore{Store: s, in: in}
}

// storePosition is the durability position of one name.
type storePosition struct {
	Index uint64
	Kind  string // "event" or "snapshot"
	At    time.Time
}

type observedStore struct {
	durability.Store
	in *Inspector
}

func (s *observedStore) note(name string, index uint64, kind string) {
	s.in.mu.Lock()
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
