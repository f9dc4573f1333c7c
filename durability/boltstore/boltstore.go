package boltstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/polyweave/polyweave-go/durability"
)

// Defaults used for zero fields of [Options].
const (
	DefaultMaxBatchSize = 4096
	DefaultFileMode     = os.FileMode(0o600)
	DefaultOpenTimeout  = 5 * time.Second
)

// formatVersion is written to a new file and checked on open.
const formatVersion = "1"

// Bucket and key names of the file layout (see the package documentation).
var (
	metaBucket      = []byte("polyweave")
	formatKey       = []byte("format")
	actorsBucket    = []byte("actors")
	eventsBucket    = []byte("events")
	snapshotsBucket = []byte("snapshots")
)

// readPage bounds how many events, and roughly how many bytes, GetEvents
// copies out of one read transaction before it calls back.
const (
	readPageEvents = 1024
	readPageBytes  = 4 << 20
)

// Options configures [Open]. A nil *Options and the zero value both mean
// defaults; negative numbers are rejected.
type Options struct {
	// Logger receives open/close and commit-failure records. Nil discards.
	Logger *slog.Logger

	// MaxBatchSize caps how many writes share one transaction and fsync.
	// Zero means DefaultMaxBatchSize.
	MaxBatchSize int

	// MaxBatchDelay makes the committer wait up to this long for more writes
	// after the first one of a batch arrives. Zero (the default) commits as
	// soon as the previous commit is done, which batches by itself under
	// load without adding latency when idle; see the package documentation.
	MaxBatchDelay time.Duration

	// NoSync skips fsync on commit.
	//
	// DANGER: with NoSync a successful persist is NOT durable: a crash or
	// power loss can lose acknowledged writes or corrupt the file. Use it
	// only in benchmarks and tests, never in a host that must survive a kill.
	NoSync bool

	// FileMode is the permission of a newly created file. Zero means
	// DefaultFileMode (0600).
	FileMode os.FileMode

	// OpenTimeout bounds the wait for the file lock held by another process.
	// Zero means DefaultOpenTimeout.
	OpenTimeout time.Duration

	// KeepHistory turns off compaction on PersistSnapshot (see
	// [durability.Store]). The default (false) compacts.
	KeepHistory bool

	// ReadOnly opens the file read-only under a shared lock: reads work,
	// every write fails with bbolt's read-only error. The file must exist.
	ReadOnly bool
}

// Store is a [durability.Store] in one bbolt file. Create it with [Open]; the
// zero value is not usable. All methods are safe for concurrent use.
type Store struct {
	db          *bolt.DB
	log         *slog.Logger
	keepHistory bool
	maxBatch    int
	batchDelay  time.Duration

	// mu guards closed and the sends on writes: Close takes it exclusively
	// to stop new operations, every operation holds it shared while it
	// touches db or writes.
	mu     sync.RWMutex
	closed bool
	writes chan *write

	committerDone chan struct{}
	closeOnce     sync.Once
	closeErr      error
}

var _ durability.Store = (*Store)(nil)

// Open opens or creates the store file at path. opts may be nil. The
// returned Store owns a committer goroutine until Close.
func Open(path string, opts *Options) (*Store, error) {
	return open(path, opts, nil)
}

// open is Open with bbolt's file-opening hook, which tests use to reach the
// underlying *os.File.
func open(path string, opts *Options, openFile func(string, int, os.FileMode) (*os.File, error)) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MaxBatchSize < 0 || o.MaxBatchDelay < 0 || o.OpenTimeout < 0 {
		return nil, fmt.Errorf("open %s: negative option (MaxBatchSize %d, MaxBatchDelay %v, OpenTimeout %v)",
			path, o.MaxBatchSize, o.MaxBatchDelay, o.OpenTimeout)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxBatchSize == 0 {
		o.MaxBatchSize = DefaultMaxBatchSize
	}
	if o.FileMode == 0 {
		o.FileMode = DefaultFileMode
	}
	if o.OpenTimeout == 0 {
		o.OpenTimeout = DefaultOpenTimeout
	}

	db, err := bolt.Open(path, o.FileMode, &bolt.Options{
		Timeout:      o.OpenTimeout,
		NoSync:       o.NoSync,
		ReadOnly:     o.ReadOnly,
		FreelistType: bolt.FreelistMapType,
		OpenFile:     openFile,
	})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := checkLayout(db, o.ReadOnly); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}

	s := &Store{
		db:            db,
		log:           o.Logger,
		keepHistory:   o.KeepHistory,
		maxBatch:      o.MaxBatchSize,
		batchDelay:    o.MaxBatchDelay,
		writes:        make(chan *write, o.MaxBatchSize),
		committerDone: make(chan struct{}),
	}
	go s.commitLoop()
	s.log.Debug("boltstore opened", "path", path, "readOnly", o.ReadOnly, "noSync", o.NoSync)
	return s, nil
}

// checkLayout creates the top-level buckets of a new file, or checks the
// format version of an existing one.
func checkLayout(db *bolt.DB, readOnly bool) error {
	check := func(tx *bolt.Tx) error {
		meta := tx.Bucket(metaBucket)
		if meta == nil {
			return nil // new or empty file; nothing to read
		}
		if v := meta.Get(formatKey); string(v) != formatVersion {
			return fmt.Errorf("unsupported file format %q (want %q)", v, formatVersion)
		}
		return nil
	}
	if readOnly {
		return db.View(check)
	}
	return db.Update(func(tx *bolt.Tx) error {
		if err := check(tx); err != nil {
			return err
		}
		meta, err := tx.CreateBucketIfNotExists(metaBucket)
		if err != nil {
			return err
		}
		if err := meta.Put(formatKey, []byte(formatVersion)); err != nil {
			return err
		}
		_, err = tx.CreateBucketIfNotExists(actorsBucket)
		return err
	})
}

// Close stops accepting operations, waits for writes already handed to the
// committer and for running reads, then closes the file. Later calls return
// the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		close(s.writes)
		s.mu.Unlock()
		<-s.committerDone
		s.closeErr = s.db.Close()
		s.log.Debug("boltstore closed", "path", s.db.Path(), "err", s.closeErr)
	})
	return s.closeErr
}

// Path returns the file's path.
func (s *Store) Path() string { return s.db.Path() }

// writeKind says what a write does inside the transaction.
type writeKind uint8

const (
	putEvent writeKind = iota
	putSnapshot
	deleteEvents
	deleteSnapshots
)

// write is one mutation waiting for the committer. done receives its
// outcome exactly once.
type write struct {
	kind  writeKind
	name  string
	index uint64
	data  []byte
	done  chan error
}

var writePool = sync.Pool{New: func() any { return &write{done: make(chan error, 1)} }}

func (k writeKind) op() string {
	switch k {
	case putEvent:
		return durability.OpPersistEvent
	case putSnapshot:
		return durability.OpPersistSnapshot
	case deleteEvents:
		return durability.OpDeleteEvents
	default:
		return durability.OpDeleteSnapshots
	}
}

// PersistEvent implements [durability.Store]. It returns once the
// transaction holding the event is committed and fsync'd.
func (s *Store) PersistEvent(ctx context.Context, name string, index uint64, data []byte) error {
	return s.submit(ctx, putEvent, name, index, data)
}

// PersistSnapshot implements [durability.Store]. The snapshot and the
// compaction it implies are committed in one transaction.
func (s *Store) PersistSnapshot(ctx context.Context, name string, index uint64, data []byte) error {
	return s.submit(ctx, putSnapshot, name, index, data)
}

// DeleteEvents implements [durability.Store].
func (s *Store) DeleteEvents(ctx context.Context, name string, through uint64) error {
	return s.submit(ctx, deleteEvents, name, through, nil)
}

// DeleteSnapshots implements [durability.Store].
func (s *Store) DeleteSnapshots(ctx context.Context, name string, through uint64) error {
	return s.submit(ctx, deleteSnapshots, name, through, nil)
}

// submit hands a write to the committer and waits for its commit.
func (s *Store) submit(ctx context.Context, kind writeKind, name string, index uint64, data []byte) error {
	if name == "" {
		return &durability.StoreError{Op: kind.op(), Name: name, Err: durability.ErrInvalidName}
	}
	w := writePool.Get().(*write)
	w.kind, w.name, w.index, w.data = kind, name, index, data

	s.mu.RLock()
	err := s.enqueue(ctx, w)
	s.mu.RUnlock()
	if err == nil {
		err = <-w.done
	}
	*w = write{done: w.done}
	writePool.Put(w)
	if err != nil {
		return &durability.StoreError{Op: kind.op(), Name: name, Err: err}
	}
	return nil
}

// enqueue sends w to the committer unless the store is closed or ctx is
// done first. s.mu must be held shared.
func (s *Store) enqueue(ctx context.Context, w *write) error {
	if s.closed {
		return durability.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case s.writes <- w:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// commitLoop is the committer goroutine: it takes the first waiting write,
// gathers every other write already queued (up to maxBatch, or during
// batchDelay), commits them in one transaction and reports to each. While a
// commit's fsync runs, new writes queue up for the next one, so concurrent
// writers share fsyncs without any fixed delay.
func (s *Store) commitLoop() {
	defer close(s.committerDone)
	batch := make([]*write, 0, s.maxBatch)
	var timer *time.Timer
	for {
		first, ok := <-s.writes
		if !ok {
			return
		}
		batch = append(batch[:0], first)
		open := true
		if s.batchDelay > 0 {
			if timer == nil {
				timer = time.NewTimer(s.batchDelay)
			} else {
				timer.Reset(s.batchDelay)
			}
		gather:
			for len(batch) < s.maxBatch {
				select {
				case w, ok := <-s.writes:
					if !ok {
						open = false
						break gather
					}
					batch = append(batch, w)
				case <-timer.C:
					break gather
				}
			}
			timer.Stop()
		}
	drain:
		for open && len(batch) < s.maxBatch {
			select {
			case w, ok := <-s.writes:
				if !ok {
					break drain
				}
				batch = append(batch, w)
			default:
				break drain
			}
		}
		s.commit(batch)
		clear(batch)
	}
}

// commit applies batch in one transaction. If that fails and the batch has
// more than one write, each write is retried alone so that one bad write
// cannot fail the others.
func (s *Store) commit(batch []*write) {
	err := s.db.Update(func(tx *bolt.Tx) error {
		for _, w := range batch {
			if err := s.apply(tx, w); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil && len(batch) > 1 {
		s.log.Warn("boltstore batch commit failed; retrying writes one by one", "writes", len(batch), "err", err)
		for _, w := range batch {
			w.done <- s.db.Update(func(tx *bolt.Tx) error { return s.apply(tx, w) })
		}
		return
	}
	if err != nil {
		s.log.Warn("boltstore commit failed", "op", batch[0].kind.op(), "name", batch[0].name, "err", err)
	}
	for _, w := range batch {
		w.done <- err
	}
}

// apply carries out one write inside tx.
func (s *Store) apply(tx *bolt.Tx, w *write) error {
	switch w.kind {
	case putEvent:
		b, err := createSub(tx, w.name, eventsBucket)
		if err != nil {
			return err
		}
		return b.Put(indexKey(w.index), w.data)
	case putSnapshot:
		b, err := createSub(tx, w.name, snapshotsBucket)
		if err != nil {
			return err
		}
		if err := b.Put(indexKey(w.index), w.data); err != nil {
			return err
		}
		if s.keepHistory || w.index == 0 {
			return nil
		}
		if err := deleteThrough(b, w.index-1); err != nil {
			return err
		}
		return deleteThrough(sub(tx, w.name, eventsBucket), w.index-1)
	case deleteEvents:
		return deleteThrough(sub(tx, w.name, eventsBucket), w.index)
	default:
		return deleteThrough(sub(tx, w.name, snapshotsBucket), w.index)
	}
}

// sub returns the named sub-bucket of name's bucket, or nil if absent.
func sub(tx *bolt.Tx, name string, which []byte) *bolt.Bucket {
	actors := tx.Bucket(actorsBucket)
	if actors == nil {
		return nil
	}
	b := actors.Bucket([]byte(name))
	if b == nil {
		return nil
	}
	return b.Bucket(which)
}

// createSub returns the named sub-bucket of name's bucket, creating both.
func createSub(tx *bolt.Tx, name string, which []byte) (*bolt.Bucket, error) {
	if b := sub(tx, name, which); b != nil {
		return b, nil
	}
	actors := tx.Bucket(actorsBucket)
	if actors == nil {
		return nil, errors.New("missing actors bucket")
	}
	b, err := actors.CreateBucketIfNotExists([]byte(name))
	if err != nil {
		return nil, fmt.Errorf("create bucket: %w", err)
	}
	return b.CreateBucketIfNotExists(which)
}

// deleteThrough removes the entries of b with index <= through. b may be nil.
func deleteThrough(b *bolt.Bucket, through uint64) error {
	if b == nil {
		return nil
	}
	// Collect first: deleting while a cursor walks the bucket can skip keys.
	var indexes []uint64
	c := b.Cursor()
	for k, _ := c.First(); k != nil && decodeIndex(k) <= through; k, _ = c.Next() {
		indexes = append(indexes, decodeIndex(k))
	}
	for _, i := range indexes {
		if err := b.Delete(indexKey(i)); err != nil {
			return err
		}
	}
	return nil
}

// GetEvents implements [durability.Store]. It copies events out of short
// read transactions, a page at a time, and calls fn outside of them, so fn
// may write to the store.
func (s *Store) GetEvents(ctx context.Context, name string, from, to uint64, fn func(index uint64, data []byte) error) error {
	type event struct {
		index uint64
		data  []byte
	}
	var page []event
	for {
		page = page[:0]
		more := false
		err := s.view(ctx, durability.OpGetEvents, name, func(tx *bolt.Tx) error {
			b := sub(tx, name, eventsBucket)
			if b == nil {
				return nil
			}
			size := 0
			c := b.Cursor()
			for k, v := c.Seek(indexKey(from)); k != nil; k, v = c.Next() {
				i := decodeIndex(k)
				if to != 0 && i >= to {
					break
				}
				if len(page) == readPageEvents || (len(page) > 0 && size+len(v) > readPageBytes) {
					more = true
					break
				}
				page = append(page, event{i, append(make([]byte, 0, len(v)), v...)})
				size += len(v)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, e := range page {
			if err := fn(e.index, e.data); err != nil {
				return err
			}
		}
		if !more {
			return nil
		}
		last := page[len(page)-1].index
		if last == math.MaxUint64 {
			return nil
		}
		from = last + 1
	}
}

// GetSnapshot implements [durability.Store].
func (s *Store) GetSnapshot(ctx context.Context, name string) (durability.Snapshot, bool, error) {
	var snap durability.Snapshot
	var ok bool
	err := s.view(ctx, durability.OpGetSnapshot, name, func(tx *bolt.Tx) error {
		b := sub(tx, name, snapshotsBucket)
		if b == nil {
			return nil
		}
		if k, v := b.Cursor().Last(); k != nil {
			snap = durability.Snapshot{Index: decodeIndex(k), Data: append(make([]byte, 0, len(v)), v...)}
			ok = true
		}
		return nil
	})
	return snap, ok, err
}

// view runs fn in a read transaction unless the store is closed, name is
// empty or ctx is done.
func (s *Store) view(ctx context.Context, op, name string, fn func(*bolt.Tx) error) error {
	if name == "" {
		return &durability.StoreError{Op: op, Name: name, Err: durability.ErrInvalidName}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	err := durability.ErrClosed
	if !s.closed {
		err = ctx.Err()
	}
	if err == nil {
		err = s.db.View(fn)
	}
	if err != nil {
		return &durability.StoreError{Op: op, Name: name, Err: err}
	}
	return nil
}

// indexKey encodes an index as an 8-byte big-endian key, so that bbolt's
// byte order is index order.
func indexKey(i uint64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), i)
}

func decodeIndex(k []byte) uint64 { return binary.BigEndian.Uint64(k) }
