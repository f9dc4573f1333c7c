package boltstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/polyweave/polyweave-go/durability"
)

// Defaults used for zero fields of [Options].
const (
	DefaultMaxBatchSize    = 4096
	DefaultFileMode        = os.FileMode(0o600)
	DefaultOpenTimeout     = 5 * time.Second
	DefaultCheckpointOps   = 8192
	DefaultCheckpointBytes = 32 << 20
)

// formatVersion is written to a new file and checked on open. Version 1
// logged one record per log value; a version-1 file whose log is empty
// (closed cleanly) is otherwise the same, so Open takes it and rewrites its
// version. One with a log left by a killed process is rejected.
const (
	formatVersion   = "2"
	formatVersionV1 = "1"
)

// Bucket and key names of the file layout (see the package documentation).
var (
	metaBucket      = []byte("polyweave")
	formatKey       = []byte("format")
	walBucket       = []byte("wal")
	actorsBucket    = []byte("actors")
	eventsBucket    = []byte("events")
	snapshotsBucket = []byte("snapshots")
)

// Options configures [Open]. A nil *Options and the zero value both mean
// defaults; negative numbers are rejected.
type Options struct {
	// Logger receives open/close, checkpoint and commit-failure records.
	// Nil discards.
	Logger *slog.Logger

	// MaxBatchSize caps how many writes share one transaction and fsync.
	// Zero means DefaultMaxBatchSize.
	MaxBatchSize int

	// MaxBatchDelay bounds how long the committer waits, once a write is
	// queued, for the other writers already inside a write call to queue
	// theirs. Zero (the default) means no bound: those writers are running,
	// so the wait is short; see the package documentation.
	MaxBatchDelay time.Duration

	// CheckpointOps and CheckpointBytes bound the write-ahead log: once it
	// holds this many writes, or this many data bytes, the committer moves
	// them into the per-actor buckets. Zero means DefaultCheckpointOps and
	// DefaultCheckpointBytes. The log's contents are also held in memory,
	// so CheckpointBytes bounds that memory too.
	CheckpointOps   int
	CheckpointBytes int

	// NoSync skips fsync on commit.
	//
	// DANGER: with NoSync a successful persist is NOT durable: a crash or
	// power loss can lose acknowledged writes or corrupt the file. Use it
	// only in benchmarks and tests, never in a host that must survive a kill.
	NoSync bool

	// FileMode is the permission of a newly created file. Zero means
	// DefaultFileMode (0600).
	FileMode os.FileMode

	// OpenTimeout bounds the wait for the file lock held by another Store
	// or process. Zero means DefaultOpenTimeout.
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
	db              *bolt.DB
	log             *slog.Logger
	keepHistory     bool
	maxBatch        int
	batchDelay      time.Duration
	checkpointOps   int
	checkpointBytes int

	// mu guards closed and the sends on writes: Close takes it exclusively
	// to stop new operations; operations hold it shared while they start.
	mu     sync.RWMutex
	closed bool
	writes chan *write

	// writers counts the writes inside submit, from before they queue until
	// they have their answer; while gathering, a writer leaving submit
	// sends on wake so that the committer recounts.
	writers   atomic.Int64
	gathering atomic.Bool
	wake      chan struct{}

	// viewMu guards overlay: readers hold it shared while they read the
	// buckets and the overlay together; the committer holds it exclusively
	// to apply committed writes and to checkpoint.
	viewMu  sync.RWMutex
	overlay *overlay

	// Owned by the committer goroutine: the next log key and the buffers
	// a commit frames its log values and keys in.
	nextSeq     uint64
	frameBuf    []byte
	frameValues [][]byte
	keyBuf      []byte

	committerDone chan struct{}
	closeOnce     sync.Once
	closeErr      error
}

var _ durability.Store = (*Store)(nil)

// Open opens or creates the store file at path. opts may be nil. Writes
// left in the log by a previous run (for example one that was killed) are
// checkpointed before Open returns. The returned Store owns a committer
// goroutine until Close.
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
	if o.MaxBatchSize < 0 || o.MaxBatchDelay < 0 || o.OpenTimeout < 0 || o.CheckpointOps < 0 || o.CheckpointBytes < 0 {
		return nil, fmt.Errorf("open %s: negative option in %+v", path, o)
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
	if o.CheckpointOps == 0 {
		o.CheckpointOps = DefaultCheckpointOps
	}
	if o.CheckpointBytes == 0 {
		o.CheckpointBytes = DefaultCheckpointBytes
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
	s := &Store{
		db:              db,
		log:             o.Logger,
		keepHistory:     o.KeepHistory,
		maxBatch:        o.MaxBatchSize,
		batchDelay:      o.MaxBatchDelay,
		checkpointOps:   o.CheckpointOps,
		checkpointBytes: o.CheckpointBytes,
		writes:          make(chan *write, o.MaxBatchSize),
		committerDone:   make(chan struct{}),
		wake:            make(chan struct{}, 1),
	}
	if err := s.load(o.ReadOnly); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	go s.commitLoop()
	s.log.Debug("boltstore opened", "path", path, "readOnly", o.ReadOnly, "noSync", o.NoSync)
	return s, nil
}

// load checks or creates the file layout, replays the log into the overlay
// and, unless read-only, checkpoints it.
func (s *Store) load(readOnly bool) error {
	if err := checkLayout(s.db, readOnly); err != nil {
		return err
	}
	ov, next, err := replay(s.db)
	if err != nil {
		return fmt.Errorf("replay log: %w", err)
	}
	s.overlay, s.nextSeq = ov, next
	if ov.ops > 0 {
		s.log.Info("boltstore replayed log", "writes", ov.ops, "actors", len(ov.actors))
	}
	if readOnly {
		return nil
	}
	return s.checkpoint()
}

// checkLayout creates the top-level buckets of a new file, or checks the
// format version of an existing one.
func checkLayout(db *bolt.DB, readOnly bool) error {
	check := func(tx *bolt.Tx) error {
		meta := tx.Bucket(metaBucket)
		if meta == nil {
			return nil // new or empty file; nothing to read
		}
		switch v := meta.Get(formatKey); string(v) {
		case formatVersion:
			return nil
		case formatVersionV1:
			if wal := tx.Bucket(walBucket); wal == nil || isEmpty(wal) {
				return nil
			}
			return fmt.Errorf("file format %q with an unreplayed log: not readable by format %q", v, formatVersion)
		default:
			return fmt.Errorf("unsupported file format %q (want %q)", v, formatVersion)
		}
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
		for _, name := range [][]byte{walBucket, actorsBucket} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return nil
	})
}

// isEmpty reports whether b holds no keys.
func isEmpty(b *bolt.Bucket) bool {
	k, _ := b.Cursor().First()
	return k == nil
}

// Close stops accepting operations, waits for writes already handed to the
// committer and for running reads, checkpoints the log and closes the file.
// Later calls return the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		close(s.writes)
		s.mu.Unlock()
		<-s.committerDone
		var cpErr error
		if !s.db.IsReadOnly() {
			cpErr = s.checkpoint()
		}
		s.closeErr = errors.Join(cpErr, s.db.Close())
		s.log.Debug("boltstore closed", "path", s.db.Path(), "err", s.closeErr)
	})
	return s.closeErr
}

// Path returns the file's path.
func (s *Store) Path() string { return s.db.Path() }

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

// indexKey encodes an index as an 8-byte big-endian key, so that bbolt's
// byte order is index order.
func indexKey(i uint64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), i)
}

func decodeIndex(k []byte) uint64 { return binary.BigEndian.Uint64(k) }
