package memstore

import (
	"context"
	"encoding/binary"
	"sync"

	"github.com/polyweave/polyweave-go/durability"
)

// MaxNameLen is the longest actor name (in bytes) the store accepts:
// durability.MaxNameLen, the smallest limit of the stores
// ([github.com/polyweave/polyweave-go/durability/pgstore.MaxNameLen]),
// so that code tested against memstore names its actors as every store
// takes them. A longer name is refused with durability.ErrInvalidName.
const MaxNameLen = durability.MaxNameLen

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

// actorLog holds one actor's events and snapshots.
//
// Events are small and many (a streaming router persists one per argument
// chunk), so their copies are carved out of blocks of memory instead of
// being allocated one by one: free is the unused tail of the current
// block. A block is freed by the garbage collector once every event copied
// into it has been deleted or replaced; block sizes double from minBlock
// to maxBlock, so an actor that persists little holds little.
type actorLog struct {
	events    eventLog
	snapshots map[uint64][]byte
	free      []byte
	block     int // size of the current block
}

// Event copy blocks, and the largest event copied into one.
const (
	minBlock   = 512
	maxBlock   = 16 << 10
	maxInBlock = maxBlock / 8
)

// keep returns the stored form of an event: its checksum (see [sealed])
// and a copy of its data, carved from l's current block.
func (l *actorLog) keep(name string, index uint64, data []byte) []byte {
	n := crcSize + len(data)
	if n > maxInBlock {
		return seal(make([]byte, 0, n), durability.RecordEvent, name, index, data)
	}
	if cap(l.free)-len(l.free) < n {
		l.block = min(max(2*l.block, minBlock), maxBlock)
		l.free = make([]byte, 0, l.block)
	}
	start := len(l.free)
	l.free = seal(l.free, durability.RecordEvent, name, index, data)
	return l.free[start:len(l.free):len(l.free)] // capped: appending to it copies
}

// dropEvents removes the events with index <= through, and lets the
// current block go when no event is left.
func (l *actorLog) dropEvents(through uint64) {
	l.events.deleteThrough(through)
	if l.events.n == 0 {
		l.free, l.block = nil, 0
	}
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
	if name == "" || len(name) > MaxNameLen {
		return &durability.StoreError{Op: op, Name: name, Err: durability.InvalidName(name, MaxNameLen)}
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
		l = &actorLog{snapshots: make(map[uint64][]byte)}
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
	l := s.logFor(name)
	l.events.put(index, l.keep(name, index, data))
	return nil
}

// PersistEvents implements [durability.Store]. The batch is stored under
// one lock hold, so no reader sees part of it.
func (s *Store) PersistEvents(ctx context.Context, name string, first uint64, data [][]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, durability.OpPersistEvents, name); err != nil {
		return err
	}
	if len(data) == 0 {
		return nil
	}
	if first+uint64(len(data)-1) < first {
		return &durability.StoreError{Op: durability.OpPersistEvents, Name: name, Err: durability.ErrIndexOverflow}
	}
	l := s.logFor(name)
	for k, d := range data {
		i := first + uint64(k)
		l.events.put(i, l.keep(name, i, d))
	}
	return nil
}

// GetEvents implements [durability.Store]. fn runs without the store's lock
// held, on copies taken before the first call.
func (s *Store) GetEvents(ctx context.Context, name string, from, to uint64, fn func(index uint64, data []byte) error) error {
	s.mu.RLock()
	if err := s.begin(ctx, durability.OpGetEvents, name); err != nil {
		s.mu.RUnlock()
		return err
	}
	var events []indexed
	var err error
	if l := s.logs[name]; l != nil {
		events, err = l.events.copies(name, from, to)
	}
	s.mu.RUnlock()
	if err != nil {
		return &durability.StoreError{Op: durability.OpGetEvents, Name: name, Err: err}
	}

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
		l.dropEvents(through)
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
	l.snapshots[index] = seal(make([]byte, 0, crcSize+len(data)), durability.RecordSnapshot, name, index, data)
	if !s.keepHistory && index > 0 {
		l.dropEvents(index - 1)
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
	data, err := open(durability.RecordSnapshot, name, latest, l.snapshots[latest], nil)
	if err != nil {
		return durability.Snapshot{}, false, &durability.StoreError{Op: durability.OpGetSnapshot, Name: name, Err: err}
	}
	return durability.Snapshot{Index: latest, Data: data}, true, nil
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

// Stored form of events and snapshots: the record's checksum
// ([durability.Checksum] over its kind, actor name, index and data; 4
// bytes, big-endian), then its data. Every read checks it, so damaged
// memory is reported, never returned.
const crcSize = 4

// storeName names memstore in damage reports.
const storeName = "memstore"

// seal appends the stored form of a record to b.
func seal(b []byte, kind durability.RecordKind, name string, index uint64, data []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, durability.Checksum(kind, name, index, data))
	return append(b, data...)
}

// open checks a record's stored form and returns a copy of its data (never
// nil, so that callers see the same shape from every store). With sum, a
// Summer of the record's kind and name, the checksum is computed as the
// data is copied, in one pass over it (see [durability.Summer.CopySum]):
// what is returned is what passed the check. Without one (a snapshot, a
// read of a few events, for which making a Summer costs more than it
// saves), the stored data is checked and then copied, under the store's
// lock, which keeps writers out: measured, that is the faster order for
// one record (checking the copy took 1.02 to 1.03 times as long).
func open(kind durability.RecordKind, name string, index uint64, stored []byte, sum *durability.Summer) ([]byte, error) {
	if len(stored) < crcSize {
		return nil, durability.Damaged(storeName, kind, index, "shorter than its checksum")
	}
	var data []byte
	var got uint32
	if sum != nil {
		data = make([]byte, len(stored)-crcSize)
		got = sum.CopySum(index, data, stored[crcSize:])
	} else {
		got = durability.Checksum(kind, name, index, stored[crcSize:])
	}
	if binary.BigEndian.Uint32(stored) != got {
		return nil, durability.Damaged(storeName, kind, index, "checksum mismatch")
	}
	if data == nil {
		data = append(make([]byte, 0, len(stored)-crcSize), stored[crcSize:]...)
	}
	return data, nil
}
