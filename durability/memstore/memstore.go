package memstore

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/polyweave/polyweave-go/durability"
)

// Options configures a Store. A nil *Options and the zero value both mean
// defaults.
type Options struct {
	// KeepHistory turns off compaction: PersistSnapshot then keeps older
	// events and snapshots. The default (false) compacts as [durability.Store]
	// describes.
	KeepHistory bool
}

// Store is an in-memory [durability.Store]. Create it with [New]; the zero
// value is not usable. All methods are safe for concurrent use.
type Store struct {
	keepHistory bool

	mu     sync.RWMutex
	closed bool
	logs   map[string]*actorLog
}

// actorLog holds one actor's events and snapshots, keyed by index.
type actorLog struct {
	events    map[uint64][]byte
	snapshots map[uint64][]byte
}

var _ durability.Store = (*Store)(nil)

// New returns an empty store. opts may be nil.
func New(opts *Options) *Store {
	s := &Store{logs: make(map[string]*actorLog)}
	if opts != nil {
		s.keepHistory = opts.KeepHistory
	}
	return s
}

// begin checks the common preconditions of every operation.
func (s *Store) begin(ctx context.Context, op, name string) error {
	if name == "" {
		return &durability.StoreError{Op: op, Name: name, Err: durability.ErrInvalidName}
	}
	if s.closed {
		return &durability.StoreError{Op: op, Name: name, Err: durability.ErrClosed}
	}
	if err := ctx.Err(); err != nil {
		return &durability.StoreError{Op: op, Name: name, Err: err}
	}
	return nil
}

// logFor returns name's log, creating it. s.mu must be held for writing.
func (s *Store) logFor(name string) *actorLog {
	l := s.logs[name]
	if l == nil {
		l = &actorLog{events: make(map[uint64][]byte), snapshots: make(map[uint64][]byte)}
		s.logs[name] = l
	}
	return l
}

// PersistEvent implements [durability.Store].
func (s *Store) PersistEvent(ctx context.Context, name string, index uint64, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, durability.OpPersistEvent, name); err != nil {
		return err
	}
	s.logFor(name).events[index] = clone(data)
	return nil
}

// GetEvents implements [durability.Store]. fn runs without the store's lock
// held, on copies taken before the first call.
func (s *Store) GetEvents(ctx context.Context, name string, from, to uint64, fn func(index uint64, data []byte) error) error {
	type event struct {
		index uint64
		data  []byte
	}
	s.mu.RLock()
	if err := s.begin(ctx, durability.OpGetEvents, name); err != nil {
		s.mu.RUnlock()
		return err
	}
	var events []event
	if l := s.logs[name]; l != nil {
		for i, d := range l.events {
			if i >= from && (to == 0 || i < to) {
				events = append(events, event{i, clone(d)})
			}
		}
	}
	s.mu.RUnlock()

	slices.SortFunc(events, func(a, b event) int { return cmp.Compare(a.index, b.index) })
	for _, e := range events {
		if err := fn(e.index, e.data); err != nil {
			return err
		}
	}
	return nil
}

// DeleteEvents implements [durability.Store].
func (s *Store) DeleteEvents(ctx context.Context, name string, through uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, durability.OpDeleteEvents, name); err != nil {
		return err
	}
	if l := s.logs[name]; l != nil {
		deleteThrough(l.events, through)
	}
	return nil
}

// PersistSnapshot implements [durability.Store].
func (s *Store) PersistSnapshot(ctx context.Context, name string, index uint64, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, durability.OpPersistSnapshot, name); err != nil {
		return err
	}
	l := s.logFor(name)
	l.snapshots[index] = clone(data)
	if !s.keepHistory && index > 0 {
		deleteThrough(l.events, index-1)
		deleteThrough(l.snapshots, index-1)
	}
	return nil
}

// GetSnapshot implements [durability.Store].
func (s *Store) GetSnapshot(ctx context.Context, name string) (durability.Snapshot, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.begin(ctx, durability.OpGetSnapshot, name); err != nil {
		return durability.Snapshot{}, false, err
	}
	l := s.logs[name]
	if l == nil || len(l.snapshots) == 0 {
		return durability.Snapshot{}, false, nil
	}
	var latest uint64
	for i := range l.snapshots {
		latest = max(latest, i)
	}
	return durability.Snapshot{Index: latest, Data: clone(l.snapshots[latest])}, true, nil
}

// DeleteSnapshots implements [durability.Store].
func (s *Store) DeleteSnapshots(ctx context.Context, name string, through uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, durability.OpDeleteSnapshots, name); err != nil {
		return err
	}
	if l := s.logs[name]; l != nil {
		deleteThrough(l.snapshots, through)
	}
	return nil
}

// Close drops all data. It always returns nil.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.logs = nil
	return nil
}

// deleteThrough removes the entries of m with index <= through.
func deleteThrough(m map[uint64][]byte, through uint64) {
	for i := range m {
		if i <= through {
			delete(m, i)
		}
	}
}

// clone copies b, keeping a non-nil result for empty input so that callers
// see the same shape from every store.
func clone(b []byte) []byte {
	return append(make([]byte, 0, len(b)), b...)
}
