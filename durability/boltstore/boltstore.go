package boltstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/internal/quote"
	"github.com/polyweave/polyweave-go/internal/benchhook"
)

// Defaults used for zero fields of [Options].
const (
	DefaultMaxBatchSize    = 4096
	DefaultFileMode        = os.FileMode(0o600)
	DefaultOpenTimeout     = 5 * time.Second
	DefaultCheckpointOps   = 8192
	DefaultCheckpointBytes = 32 << 20
)

// formatVersion is written to a new file and checked on open.
//
//   - "6": as 5, and the file holds bucket "set-aside" (see
//     [Store.setAside]): a binary that reads format 5 at most would read
//     that bucket's broken pages as damage of the file, so the version
//     says it is there. Salvage marks a file 6 when it sets a bucket
//     aside, Compact marks its copy 5 as it drops them, and Open marks a
//     version 5 file that holds the bucket 6 (written before version 6
//     existed) and a version 6 file that does not hold it 5.
//   - "5": as 4, and a log value larger than 16 KiB is held by a nested
//     bucket under its key, as that bucket's one value under the same key
//     (see [putLogValue]). Open upgrades a version 4 or 3 file to it
//     (nothing to rewrite).
//   - "4": as 3, and each record in a log value carries its own checksums
//     (of its header, and of the record as its bucket value will), and
//     the log may start after key 0 (key "logstart" of the meta bucket).
//   - "3": every stored value carries its CRC-32C: bucket values and log
//     values start with it (see the package documentation).
//   - "2": no checksums; the log holds one framed value per commit. Open
//     reads it once, with a warning, and rewrites it as version 5 (a
//     read-only Open reads it unchecked, with a warning).
//   - "1": as 2, with one record per log value: taken like 2 when its log
//     is empty (closed cleanly), refused otherwise.
const (
	formatVersion         = "5"
	formatVersionSetAside = "6"
	formatVersionV4       = "4"
	formatVersionV3       = "3"
	formatVersionV2       = "2"
	formatVersionV1       = "1"
)

// Bucket and key names of the file layout (see the package documentation).
var (
	metaBucket      = []byte("polyweave")
	formatKey       = []byte("format")
	walBucket       = []byte("wal")
	actorsBucket    = []byte("actors")
	eventsBucket    = []byte("events")
	snapshotsBucket = []byte("snapshots")
	setAsideBucket  = []byte("set-aside")
)

// MaxNameLen is the longest actor name (in bytes) the store accepts:
// bbolt's longest key, as the name is its actor bucket's key. A longer
// name is refused with durability.ErrInvalidName.
const MaxNameLen = bolt.MaxKeySize

// The stores' common limit, durability.MaxNameLen, is at most this one's
// (the build fails otherwise).
const _ = uint(MaxNameLen - durability.MaxNameLen)

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

	// MetaFallback lets Open take a file whose newest meta page is damaged
	// as bbolt does: from its other meta page, that is the state before the
	// last commit, which loses that commit if it had been acknowledged.
	// Without it (the default), such a file is refused: one meta page
	// cannot tell a commit torn by a crash (nothing acknowledged is lost)
	// from damage after it (an acknowledged commit would be lost).
	MetaFallback bool

	// ReadOnly opens the file read-only under a shared lock: reads work,
	// every write fails with bbolt's read-only error. The file must exist.
	ReadOnly bool

	// freeNothing makes a writable Open of a file whose freelist cannot be
	// used (damaged, or not recorded, with pages of the tree broken) give
	// it a freelist that lists no page free, so that no page is reused:
	// [SalvageFile] opens its copy so, and compacts it.
	freeNothing bool
}

// Store is a [durability.Store] in one bbolt file. Create it with [Open]; the
// zero value is not usable. All methods are safe for concurrent use.
type Store struct {
	db              *bolt.DB
	writePool       sync.Pool                                        // of *write, made by newWrite: see newWrite
	file            *os.File                                         // the descriptor bbolt reads and writes the file through
	openFile        func(string, int, os.FileMode) (*os.File, error) // opens every file: the store's, Compact's copy, the folder synced
	path            string
	legacy          bool // a version 2 file open read-only: values carry no checksum
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
	// they have their answer; queued the writes sent on writes that the
	// committer has not received; gathered how many the batch it gathers
	// holds. While gathering, the writer whose queueing or leaving makes
	// every writer inside accounted for (gathered+queued >= writers) sends
	// on wake: the committer sleeps until then, not woken by each write.
	writers   atomic.Int64
	queued    atomic.Int64
	gathered  atomic.Int64
	gathering atomic.Bool
	wake      chan struct{}

	// viewMu guards overlay, flushing and quarantine: readers hold it
	// shared while they read the buckets and the overlays together; the
	// committer holds it exclusively to change them.
	viewMu sync.RWMutex
	// overlay holds the committed writes not in the buckets; flushing,
	// while a checkpoint is under way, the older ones it is moving into
	// the buckets (see [step]).
	overlay, flushing *overlay
	// quarantine holds the actors found damaged (see [quarantined]);
	// quarantined counts them, so that writes check the map only then.
	quarantine  map[string]*quarantined
	quarantined atomic.Int64

	// Owned by the committer goroutine: the checkpoint's remaining steps,
	// the log's first key, the first key after the checkpoint's part of
	// the log, the next log key, and the buffers a commit frames its log
	// values and keys in.
	steps          []step
	stepRecords    int
	minStepRecords int
	logStart       uint64
	cut            uint64
	nextSeq        uint64
	frameBuf       []byte
	frameValues    [][]byte
	keyBuf         []byte

	// compacting (owned by the committer) holds checkpoints back while
	// Compact copies the buckets; compactMu (a token of one, so that a
	// wait for it watches a context) serializes Compact, with itself and
	// with Salvage.
	compacting bool
	compactMu  chan struct{}
	noSync     bool

	// syncFailed holds the permanent error every write transaction fails
	// with once a sync failed (see [Store.failWrites]).
	syncFailed atomic.Pointer[error]

	committerDone chan struct{}
	closeOnce     sync.Once
	closeErr      error
}

var _ durability.Store = (*Store)(nil)

// Open opens the store file at path, or creates it if nothing exists at
// path. opts may be nil. Unless it is read-only or NoSync, Open syncs the
// file's folder, also for a file that exists (one whose creator crashed
// may have an entry in the folder that is not yet on disk), and fails
// when that fails. Writes left in the log by a previous run (for
// example one that was killed) are checkpointed before Open returns. The
// returned Store owns a committer goroutine until Close.
//
// An existing file is checked before bbolt maps it, and every bbolt call
// is guarded, so a damaged file gives an error (a *durability.StoreError
// wrapping a *durability.DamageError that says what is damaged and where),
// never a panic or a fault; damage confined to one actor's pages does not
// fail Open: that actor is quarantined (see the package documentation).
// An existing empty or headerless file is refused, never taken as new, and
// so is a path that is not a regular file (a folder, a FIFO, a device). A file held by another process gives an
// error wrapping durability.ErrLocked once OpenTimeout has passed.
func Open(path string, opts *Options) (*Store, error) {
	return open(context.Background(), path, opts, nil)
}

// OpenContext is [Open] bounded by ctx: the wait for the lock ends when
// ctx is done (or once opts.OpenTimeout has passed, whichever comes
// first), and the check of the file's pages and the replay of its log,
// which take long for a large file, stop when ctx is done, with an error
// wrapping ctx.Err() and its cause (context.Cause), leaving the file
// (nothing written, no descriptor open, no lock held) for a later Open. Once the log is
// replayed, Open checkpoints it whatever ctx says: that is one commit.
func OpenContext(ctx context.Context, path string, opts *Options) (*Store, error) {
	return open(ctx, path, opts, nil)
}

// open is OpenContext with a file-opening hook, which tests use to reach
// the underlying *os.File or to make opening a file fail: the store opens
// every file through it (see Store.openFile).
func open(ctx context.Context, path string, opts *Options, openFile func(string, int, os.FileMode) (*os.File, error)) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if ctx.Err() != nil {
		return nil, &durability.StoreError{Op: durability.OpOpen, Err: fmt.Errorf("%s: %w", path, stopCause(ctx))}
	}
	fail := func(err error) (*Store, error) {
		var de *durability.DamageError
		var nr *notRegularError
		if marked := fileFailure(path, err, nil); durability.IsPermanent(marked) {
			err = marked // names the file already, or damage naming it
		} else if !errors.As(err, &de) && !errors.Is(err, durability.ErrLocked) && !errors.As(err, &nr) {
			err = fmt.Errorf("%s: %w", path, err)
		}
		return nil, &durability.StoreError{Op: durability.OpOpen, Err: err}
	}
	if o.MaxBatchSize < 0 || o.MaxBatchDelay < 0 || o.OpenTimeout < 0 || o.CheckpointOps < 0 || o.CheckpointBytes < 0 {
		return fail(fmt.Errorf("negative option in %+v", o))
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
	if deadline, ok := ctx.Deadline(); ok {
		o.OpenTimeout = max(min(o.OpenTimeout, time.Until(deadline)), time.Nanosecond)
	}
	if o.CheckpointOps == 0 {
		o.CheckpointOps = DefaultCheckpointOps
	}
	if o.CheckpointBytes == 0 {
		o.CheckpointBytes = DefaultCheckpointBytes
	}
	if openFile == nil {
		openFile = os.OpenFile
	}

	if fi, err := os.Stat(path); err == nil {
		if err := notRegular(path, fi); err != nil {
			return fail(err)
		}
	}
	switch _, err := os.Lstat(path); {
	case errors.Is(err, fs.ErrNotExist) && !o.ReadOnly:
		if dir := filepath.Dir(path); !isDir(dir) {
			return fail(fmt.Errorf("cannot create it: the folder %s does not exist", dir))
		}
		if err := create(path, &o, openFile); err != nil { // syncs the folder
			return fail(err)
		}
	case err == nil && !o.ReadOnly && !o.NoSync:
		// The file's entry in its folder may not be on disk yet: the
		// process that created it may have crashed before syncing the
		// folder. Writes made durable in a file whose entry is not
		// would be lost with it.
		if err := syncDir(openFile, filepath.Dir(path)); err != nil {
			return fail(fmt.Errorf("sync its folder: %w", err))
		}
	}
	db, file, t, err := openBolt(ctx, path, path, &o, openFile)
	if err != nil {
		return fail(err)
	}
	s := &Store{
		writePool:       sync.Pool{New: newWrite},
		compactMu:       make(chan struct{}, 1),
		db:              db,
		file:            file,
		openFile:        openFile,
		path:            path,
		noSync:          o.NoSync,
		log:             o.Logger,
		keepHistory:     o.KeepHistory,
		maxBatch:        o.MaxBatchSize,
		batchDelay:      o.MaxBatchDelay,
		checkpointOps:   o.CheckpointOps,
		checkpointBytes: o.CheckpointBytes,
		writes:          make(chan *write, o.MaxBatchSize),
		committerDone:   make(chan struct{}),
		wake:            make(chan struct{}, 1),
		stepRecords:     stepRecords,
		minStepRecords:  minStepRecords,
	}
	if err := s.load(ctx, o.ReadOnly, t); err != nil {
		db.Close()
		return fail(err)
	}
	go s.commitLoop()
	s.log.Debug("boltstore opened", "path", path, "readOnly", o.ReadOnly, "noSync", o.NoSync)
	return s, nil
}

// create makes a new store file at path atomically: it lays the file out
// under a temporary name next to it and links it into place only if path
// still does not exist, so that a file at path is always a complete store
// (a crash during creation leaves only the temporary file).
func create(path string, o *Options, openFile func(string, int, os.FileMode) (*os.File, error)) error {
	tmp := fmt.Sprintf("%s.creating-%d-%d", path, os.Getpid(), time.Now().UnixNano())
	defer os.Remove(tmp)
	db, err := bolt.Open(tmp, o.FileMode, &bolt.Options{NoSync: o.NoSync, FreelistType: bolt.FreelistMapType, OpenFile: openFile})
	if err != nil {
		// The temporary name means nothing to the caller: name the store.
		var pe *fs.PathError
		if errors.As(err, &pe) && pe.Path == tmp {
			return fmt.Errorf("create: %w", pe.Err)
		}
		return err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucket(metaBucket)
		if err != nil {
			return err
		}
		if err := meta.Put(formatKey, []byte(formatVersion)); err != nil {
			return err
		}
		for _, name := range [][]byte{walBucket, actorsBucket} {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		return writeDirectory(tx, directory{})
	})
	if err := errors.Join(err, db.Close()); err != nil {
		return fmt.Errorf("create: %w", err)
	}
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create: %w", err)
	}
	if o.NoSync {
		return nil
	}
	return syncDir(openFile, filepath.Dir(path))
}

// openBolt opens an existing file with bbolt: it locks the file itself
// (so that a lock held elsewhere gives a clear error), checks it with
// [validateFile] before bbolt maps it, then hands bbolt the locked file,
// which it returns too (bbolt closes it), with what validateFile found
// in the file's tree (nil for a new file). Its errors name the file name
// (Verify and SalvageFile open a copy of the file they report on).
func openBolt(ctx context.Context, path, name string, o *Options, openFile func(string, int, os.FileMode) (*os.File, error)) (*bolt.DB, *os.File, *tree, error) {
	flag := os.O_RDWR
	if o.ReadOnly {
		flag = os.O_RDONLY
	}
	f, err := openFile(path, flag|openFlags, o.FileMode)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := regularFile(f, name); err != nil {
		f.Close()
		return nil, nil, nil, err
	}
	if err := lockFile(ctx, f, name, o.ReadOnly, o.OpenTimeout); err != nil {
		f.Close()
		return nil, nil, nil, err
	}
	m, t, err := validateFile(ctx, f, name, o.MetaFallback)
	if err == nil && !o.ReadOnly && t != nil {
		// Refused before anything is written to it (the freelist below).
		err = t.layout()
	}
	switch {
	case err != nil || o.ReadOnly: // bbolt reads no freelist for a read-only file
	case o.freeNothing && (t.freelist != nil && !t.rebuild || m.freelist == noFreelist && damagedPages(t) != nil):
		err = rebuildFreelist(f, m, nil, o.NoSync)
	case m.freelist == noFreelist:
		err = unrebuildableFreelist(name, t)
	case t.freelist != nil && !t.rebuild:
		err = t.freelist
	case t.freelist != nil:
		if err = rebuildFreelist(f, m, t.free, o.NoSync); err == nil && o.Logger != nil {
			o.Logger.Warn("boltstore: the freelist page was damaged; rebuilt from the tree, which is intact", "path", name, "damage", t.freelist, "free", len(t.free))
		}
	}
	if err != nil {
		f.Close()
		return nil, nil, nil, err
	}
	var db *bolt.DB
	err = guard(name, "opening the file", nil, func() error {
		var err error
		db, err = bolt.Open(path, o.FileMode, &bolt.Options{
			Timeout:      o.OpenTimeout,
			NoSync:       o.NoSync,
			ReadOnly:     o.ReadOnly,
			FreelistType: bolt.FreelistMapType,
			OpenFile:     func(string, int, os.FileMode) (*os.File, error) { return f, nil },
		})
		return err
	})
	if err != nil {
		f.Close() // bbolt closed it unless it panicked
		return nil, nil, nil, err
	}
	return db, f, t, nil
}

// unrebuildableFreelist returns the error for opening for writing a file
// that records no freelist (bbolt's NoFreelistSync) while t found damaged
// pages in it, or nil when it found none. bbolt rebuilds such a file's
// freelist when it opens it for writing by reading every bucket, the
// damaged ones too, on a goroutine of its own, where a panic cannot be
// recovered and would end the process: it must never read them. A
// read-only Open does not rebuild the freelist and serves the other
// actors.
func unrebuildableFreelist(path string, t *tree) error {
	var de *durability.DamageError
	if len(t.actors) > 0 {
		de = t.actors[slices.Sorted(maps.Keys(t.actors))[0]].err
	} else if len(t.setAside) == 0 || !errors.As(t.setAside[0], &de) {
		return nil
	}
	return damaged(path, de.What, de.Offset,
		"%s; and the file records no freelist (it was written with bbolt's NoFreelistSync), which bbolt rebuilds when it opens the file for writing by reading every bucket, these damaged pages too: refused for writing (Options.ReadOnly reads the other actors; polyweave-store salvage copies what is intact into a new file)",
		de.Reason)
}

// viewTx and updateTx run a bbolt transaction under [guard]; updateTx
// marks the failures that repeating cannot cure (see [fileFailure]).
//
// A commit whose sync failed (fdatasync, EIO on a disk) leaves the file's
// pages in memory possibly unlike those on disk: the kernel may drop the
// pages it could not write, or keep them as written, and bbolt, which
// rolled its free list back, may still see that commit's meta page
// through its mapping and hand out pages the commit's tree uses. Going
// on with that state could damage the file, so updateTx fails that
// commit, and every later write transaction, with one permanent error
// until the store is opened again (which reads the file's state afresh;
// what was acknowledged is in the log). Reads go on.
func (s *Store) viewTx(doing string, fn func(*bolt.Tx) error) error {
	return guard(s.path, doing, boltInfo(s.db), func() error { return s.db.View(fn) })
}

func (s *Store) updateTx(doing string, fn func(*bolt.Tx) error) error {
	if benchhook.TrackCommits.Load() {
		writes := func() int64 { st := s.db.Stats(); return st.TxStats.GetWrite() }
		before := writes()
		defer func() {
			n := writes() - before
			for m := benchhook.MaxCommitWrites.Load(); n > m && !benchhook.MaxCommitWrites.CompareAndSwap(m, n); m = benchhook.MaxCommitWrites.Load() {
			}
		}()
	}
	if err := s.writable(); err != nil {
		return err
	}
	err := guard(s.path, doing, boltInfo(s.db), func() error { return s.db.Update(fn) })
	if isSyncFailure(err) {
		return s.failWrites(syncFailedWhy, fmt.Errorf("%s: sync: %w", doing, err))
	}
	return fileFailure(s.path, err, func() error { return descriptorFailure(s.file) })
}

// writable returns the permanent error the store's writes fail with once
// a sync failed (see [Store.failWrites]), or nil.
func (s *Store) writable() error {
	if failed := s.syncFailed.Load(); failed != nil {
		return *failed
	}
	return nil
}

// failWrites makes every later write transaction, and Compact, fail with
// one permanent error, naming the file and saying why, until the store is
// opened again, and returns that error: a sync failed (of a commit, or of
// the folder after Compact renamed its copy over the file), so going on
// could damage the file or lose what is acknowledged. The first such
// error is kept.
func (s *Store) failWrites(why string, cause error) error {
	err := durability.Permanent(&fileError{path: s.path, why: why, err: cause})
	if !s.syncFailed.CompareAndSwap(nil, &err) {
		return *s.syncFailed.Load()
	}
	s.log.Error("boltstore: a sync failed; the store takes no more writes until it is opened again", "path", s.path, "err", err)
	return err
}

// errNotAStore refuses a bbolt file without the buckets of a store.
var errNotAStore = fmt.Errorf("a bbolt file without the buckets of a store (%q, %q): not a store file, or its root is damaged", metaBucket, actorsBucket)

// unsupportedFormat returns the error for a file of format version, or
// nil for a format this version reads.
func unsupportedFormat(version string) error {
	switch version {
	case formatVersionSetAside, formatVersion, formatVersionV4, formatVersionV3, formatVersionV2, formatVersionV1:
		return nil
	}
	return fmt.Errorf("unsupported file format %q (this version writes %q and %q, and upgrades %q, %q, %q and %q): written by a newer version?", version, formatVersion, formatVersionSetAside, formatVersionV4, formatVersionV3, formatVersionV2, formatVersionV1)
}

// load checks the file's layout and format version, replays the log into
// the overlay and, unless read-only, checkpoints it (upgrading a version
// 2, 3 or 4 file to version 5 in the same transaction). The actors whose
// pages t found damaged (t may be nil) are quarantined.
func (s *Store) load(ctx context.Context, readOnly bool, t *tree) error {
	var version string
	var setAside bool
	err := s.viewTx("reading the layout", func(tx *bolt.Tx) error {
		meta := tx.Bucket(metaBucket)
		if meta == nil || tx.Bucket(actorsBucket) == nil {
			return errNotAStore
		}
		version = string(meta.Get(formatKey))
		setAside = tx.Bucket(setAsideBucket) != nil
		if err := unsupportedFormat(version); err != nil {
			return err
		}
		if version == formatVersionV1 {
			if wal := tx.Bucket(walBucket); wal != nil && !isEmpty(wal) {
				return fmt.Errorf("file format %q with an unreplayed log: not readable by format %q", version, formatVersion)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	legacy, layout, nested := logFormat(version)
	if legacy && !readOnly && t != nil && len(t.actors) > 0 {
		// The upgrade rewrites every actor's records: it cannot leave one out.
		name := slices.Sorted(maps.Keys(t.actors))[0]
		return fmt.Errorf("file format %q, whose upgrade rewrites every actor, with the pages of actor %s damaged (%w): open it read-only to read the other actors", version, quote.Name(name, "actor name"), t.actors[name].err)
	}
	if !legacy {
		if err := s.viewTx("checking the actors", s.checkDirectory); err != nil {
			return err
		}
	}
	r, err := s.replay(ctx, legacy, layout, nested)
	if err != nil {
		return err
	}
	s.overlay, s.nextSeq, s.logStart = r.overlay, r.next, r.start
	for name, q := range r.quarantine {
		s.log.Error("boltstore: actor quarantined: its writes in the log are damaged; its reads and writes fail until Salvage, the other actors go on", "path", s.path, "actor", quote.Name(name, "actor name"), "damage", q.err)
	}
	if t != nil {
		for name, ap := range t.actors {
			q := r.quarantine[name]
			if q == nil {
				q = &quarantined{}
				r.quarantine[name] = q
			}
			q.err, q.pages, q.skip = ap.err, ap.header, ap.skip
			s.log.Error("boltstore: actor quarantined: its pages in the file are damaged; its reads and writes fail until Salvage, the other actors go on", "path", s.path, "actor", quote.Name(name, "actor name"), "damage", ap.err)
		}
	}
	s.quarantine = r.quarantine
	s.quarantined.Store(int64(len(r.quarantine)))
	if r.overlay.ops > 0 {
		s.log.Info("boltstore replayed log", "writes", r.overlay.ops, "actors", len(r.overlay.actors))
	}
	if readOnly {
		if legacy {
			s.legacy = true
			s.log.Warn("boltstore: file format without checksums, read unchecked (read-only: not upgraded)", "path", s.path, "format", version)
		}
		return nil
	}
	if legacy {
		s.log.Warn("boltstore: upgrading a file format without checksums: its records are accepted unchecked this once and rewritten with checksums", "path", s.path, "format", version)
		return s.upgrade()
	}
	if want := writtenFormat(setAside); version != want {
		// Versions 3 and 4 need nothing rewritten; see formatVersionSetAside.
		return s.checkpointWith(func(tx *bolt.Tx) error { return tx.Bucket(metaBucket).Put(formatKey, []byte(want)) })
	}
	return s.checkpoint()
}

// writtenFormat is the format version of a file this version writes: 6
// when it holds bucket "set-aside", else 5.
func writtenFormat(setAside bool) string {
	if setAside {
		return formatVersionSetAside
	}
	return formatVersion
}

// logFormat says how the log of a file of format version is read: legacy
// (values without checksums: version 2 or 1), the layout of its records,
// and whether a log value may be held by a nested bucket (version 5 or 6).
func logFormat(version string) (legacy bool, layout recordLayout, nested bool) {
	nested = version == formatVersion || version == formatVersionSetAside
	legacy = !nested && version != formatVersionV4 && version != formatVersionV3
	return legacy, recordLayout(nested || version == formatVersionV4), nested
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
		s.closeErr = errors.Join(cpErr, guard(s.path, "closing", nil, s.db.Close))
		s.log.Debug("boltstore closed", "path", s.db.Path(), "err", s.closeErr)
	})
	return s.closeErr
}

// Path returns the file's path.
func (s *Store) Path() string { return s.path }

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

// indexKey encodes an index as an 8-byte big-endian key, so that bbolt's
// byte order is index order.
func indexKey(i uint64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), i)
}

func decodeIndex(k []byte) uint64 { return binary.BigEndian.Uint64(k) }

// isDir says whether path is an existing folder (or a link to one).
func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}
