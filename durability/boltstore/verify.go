package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/polyweave/polyweave-go/durability"
)

// Report is what [Verify] found in a store file: what it still holds and
// what is damaged.
type Report struct {
	Path   string
	Format string // the file's format version, "" if unreadable

	// Copy, when set, says that a running store held the file and that
	// the report is of a consistent copy taken meanwhile (see [Verify]).
	Copy string

	// Unreadable is set when the file cannot be read as a store at all
	// (not a bbolt file, truncated, both meta pages damaged); the other
	// fields are then empty.
	Unreadable error

	// Problems lists damage outside any one actor: meta pages, the
	// directory of actors, the log.
	Problems []error

	// Unchecked says that the file's format (written before records had
	// checksums: "1" or "2") gives nothing to check its records against:
	// they were read, not verified, and the report cannot call them
	// intact.
	Unchecked bool

	// SetAside lists the damaged buckets that [Store.Salvage] set aside:
	// they are kept in the file, never read, until [Store.Compact] drops
	// them; the store does not serve them.
	SetAside []error

	// LogUnreplayed says that the log could not be read as the store reads
	// it (see Problems): the actors are reported as their buckets hold
	// them, without the log's writes.
	LogUnreplayed bool

	LogEntries int // log entries (commits not yet checkpointed) that are intact
	LogRecords int // records in those entries
	LogActors  []string

	Actors []ActorReport
}

// ActorReport is what Verify found of one actor: its bucket with the
// log's writes not yet checkpointed on top, as the store serves it.
type ActorReport struct {
	Name string

	Events                int    // intact events
	FirstEvent, LastEvent uint64 // indexes of the first and last intact event
	Snapshots             int    // intact snapshots
	LastSnapshot          uint64 // index of the newest intact snapshot

	// Logged counts the writes of the log (not yet checkpointed into the
	// actor's bucket) among those records.
	Logged int

	// Pages says that the actor's own pages in the file are damaged: the
	// store quarantines it (its reads fail) until Salvage, which keeps
	// what the counts above say is intact.
	Pages bool

	// Damaged lists the damaged records and summary mismatches, each a
	// *durability.DamageError.
	Damaged []error
}

// Intact reports whether nothing damaged was found.
func (r *Report) Intact() bool {
	if r.Unreadable != nil || len(r.Problems) > 0 {
		return false
	}
	for _, a := range r.Actors {
		if len(a.Damaged) > 0 {
			return false
		}
	}
	return true
}

// Verify reads the store file at path without changing it, under a shared
// lock, and reports what it still holds and what is damaged: every value
// is checked, every actor bucket compared with its summary, the log read
// entry by entry. Unlike Open it goes on past damage, one actor at a time,
// so that a damaged record does not hide the intact ones. A file whose
// newest meta page is damaged is read from its other meta page (bbolt's
// fallback), and that is reported. opts may be nil; only OpenTimeout is
// used (zero means DefaultOpenTimeout; a negative one is an error, as
// for Open).
//
// A file that a running store holds (its lock is still taken after
// opts.OpenTimeout) is verified from a copy: Verify copies the file
// until a copy is consistent (no commit finished while it was taken: the
// meta pages are the same before and after, and bbolt does not reuse a
// page of the tree a meta page names before two more commits), verifies
// the copy and says so in [Report].Copy. The copy shows the store as of
// one commit, with its log not yet checkpointed. It is taken in the
// temporary folder (os.TempDir) and, except on Windows, has no name
// there once created: it lives as long as Verify holds it, so a verify
// that is interrupted or killed leaves nothing behind.
//
// A path that is not a regular file (a folder, a FIFO, a device) is an
// error, before anything is opened.
//
// The error is for failures to read the file at all (it does not exist,
// it is locked and changes too often for a consistent copy); damage is in
// the report.
func Verify(path string, opts *Options) (*Report, error) {
	return VerifyContext(context.Background(), path, opts)
}

// VerifyContext is [Verify] bounded by ctx: the wait for the lock ends
// when ctx is done (or once opts.OpenTimeout has passed, whichever comes
// first), and the copy of a held file and the verification stop when
// ctx is done, with an error wrapping ctx.Err() and its cause
// (context.Cause); the copy is then removed.
func VerifyContext(ctx context.Context, path string, opts *Options) (*Report, error) {
	o := Options{OpenTimeout: DefaultOpenTimeout}
	if opts != nil && opts.OpenTimeout < 0 {
		return nil, fmt.Errorf("verify %s: negative OpenTimeout %v (zero means DefaultOpenTimeout)", path, opts.OpenTimeout)
	}
	if opts != nil && opts.OpenTimeout > 0 {
		o.OpenTimeout = opts.OpenTimeout
	}
	if deadline, ok := ctx.Deadline(); ok {
		o.OpenTimeout = max(min(o.OpenTimeout, time.Until(deadline)), time.Nanosecond)
	}
	o.ReadOnly, o.MetaFallback, o.FileMode = true, true, DefaultFileMode
	if fi, err := os.Stat(path); err != nil {
		return nil, err
	} else if err := notRegular(path, fi); err != nil {
		return nil, err
	}
	stopped := func(doing string) error {
		return fmt.Errorf("verify %s: stopped while %s: %w", path, doing, stopCause(ctx))
	}
	if ctx.Err() != nil {
		return nil, stopped("starting")
	}
	r, err := verifyFile(ctx, path, path, &o, os.OpenFile)
	if err != nil && ctx.Err() != nil {
		return nil, stopped("verifying")
	}
	if !errors.Is(err, durability.ErrLocked) {
		return r, err
	}
	tmp, cerr := consistentCopy(ctx, path)
	if cerr != nil {
		if ctx.Err() != nil {
			return nil, stopped("copying the file a running store holds")
		}
		return nil, fmt.Errorf("%w; %w", err, cerr)
	}
	if verifyCopied != nil {
		verifyCopied(tmp)
	}
	// bbolt closes the copy's descriptor; where it still has a name, it
	// is removed.
	defer os.Remove(tmp.Name())
	r, err = verifyFile(ctx, tmp.Name(), path, &o, func(string, int, os.FileMode) (*os.File, error) { return tmp, nil })
	if err != nil && ctx.Err() != nil {
		return nil, stopped("verifying the copy")
	}
	if r != nil {
		r.Copy = lockNote(path) + ": verified a consistent copy taken meanwhile"
	}
	return r, err
}

// lockNote says who holds the lock on path, for Report.Copy.
func lockNote(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return path + " is held by a running store"
	}
	defer f.Close()
	holder := lockHolder(f)
	if holder == "" {
		holder = "a running store"
	}
	return fmt.Sprintf("%s is held by %s", path, holder)
}

// copyAttempts bounds the copies consistentCopy takes.
const copyAttempts = 50

// verifyCopied, when set (by tests), is called with the copy Verify takes
// of a held file, before it verifies it; copiedChunk after each chunk of
// it is copied.
var (
	verifyCopied func(*os.File)
	copiedChunk  func()
)

// copyChunk is how much consistentCopy copies between two looks at its
// context.
const copyChunk = 1 << 20

// consistentCopy copies the store file at path, which a running store may
// be committing to, into a temporary file until a copy is consistent: the
// bytes of both meta pages are the same before and after the copy. It
// returns the copy, open, or stops when ctx is done. Where the system allows it (not Windows), the
// copy's name is removed as soon as it is created: the copy lives as long
// as its descriptor, so an interrupted or killed verify leaves nothing
// behind.
func consistentCopy(ctx context.Context, path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	metas := func() ([]byte, error) {
		ps := int64(os.Getpagesize())
		if m, err := readMeta(f, 0, 0); err == nil && m.pageSize >= minPageSize && m.pageSize <= maxPageSize {
			ps = int64(m.pageSize)
		}
		b := make([]byte, 2*ps)
		n, err := f.ReadAt(b, 0)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		return b[:n], nil
	}
	tmp, err := os.CreateTemp("", "polyweave-verify-*.db")
	if err != nil {
		return nil, err
	}
	if runtime.GOOS != "windows" {
		os.Remove(tmp.Name())
	}
	for range copyAttempts {
		before, err := metas()
		if err != nil {
			break
		}
		if _, err := tmp.Seek(0, io.SeekStart); err != nil {
			break
		}
		if err := tmp.Truncate(0); err != nil {
			break
		}
		if err := copyFile(ctx, tmp, io.NewSectionReader(f, 0, 1<<62)); err != nil {
			break
		}
		after, err := metas()
		if err != nil {
			break
		}
		if bytes.Equal(before, after) {
			return tmp, nil
		}
	}
	tmp.Close()
	os.Remove(tmp.Name())
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("no consistent copy in %d attempts (the store commits while each copy is taken): stop the process holding it, or verify it when it is idle", copyAttempts)
}

// copyFile copies src to dst, from their current offsets, a chunk at a
// time, until src ends or ctx is done.
func copyFile(ctx context.Context, dst io.Writer, src io.Reader) error {
	buf := make([]byte, copyChunk)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := io.ReadFull(src, buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
			if copiedChunk != nil {
				copiedChunk()
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// verifyFile is Verify of the file at path, reported as name; it stops
// when ctx is done.
func verifyFile(ctx context.Context, path, name string, o *Options, openFile func(string, int, os.FileMode) (*os.File, error)) (*Report, error) {
	r := &Report{Path: name}
	db, file, t, err := openBolt(ctx, path, name, o, openFile)
	var nr *notRegularError
	if errors.Is(err, durability.ErrLocked) || errors.As(err, &nr) || err != nil && ctx.Err() != nil {
		return nil, err
	}
	if err != nil {
		r.Unreadable = err
		return r, nil
	}
	defer db.Close()
	if t.fallback != nil {
		r.Problems = append(r.Problems, t.fallback)
	}
	if t.freelist != nil {
		r.Problems = append(r.Problems, t.freelist)
	}
	r.SetAside = t.setAside
	s := &Store{db: db, file: file, path: name, compactMu: make(chan struct{}, 1)}
	err = s.viewTx("reading the layout", func(tx *bolt.Tx) error {
		meta := tx.Bucket(metaBucket)
		if meta == nil || tx.Bucket(actorsBucket) == nil {
			return fmt.Errorf("a bbolt file without the buckets of a store (%q, %q)", metaBucket, actorsBucket)
		}
		r.Format = string(meta.Get(formatKey))
		return nil
	})
	if err != nil {
		r.Unreadable = err
		return r, nil
	}
	legacy, layout, nested := logFormat(r.Format)
	s.legacy = legacy
	r.Unchecked = legacy
	if legacy && r.Format != formatVersionV2 && r.Format != formatVersionV1 {
		r.Unreadable = fmt.Errorf("unsupported file format %q", r.Format)
		return r, nil
	}
	if !legacy {
		if err := s.viewTx("checking the actors", s.checkDirectory); err != nil {
			r.Problems = append(r.Problems, err)
		}
	}
	if err := s.verifyLog(ctx, r, legacy, layout, nested); err != nil {
		return nil, err
	}
	// The log's writes, as the store serves them on top of the buckets;
	// a log that cannot be replayed is in the problems already, and the
	// actors are then reported as their buckets hold them.
	pending := newOverlay()
	if rep, err := s.replay(ctx, legacy, layout, nested); err == nil {
		pending = rep.overlay
	} else if ctx.Err() != nil {
		return nil, err
	} else {
		r.LogUnreplayed = true
	}
	names := map[string]bool{}
	err = s.viewTx("listing the actors", func(tx *bolt.Tx) error {
		return tx.Bucket(actorsBucket).ForEach(func(k, v []byte) error {
			if v == nil {
				names[string(k)] = true
			}
			return nil
		})
	})
	if err != nil {
		r.Problems = append(r.Problems, err)
	}
	for name := range pending.actors {
		names[name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r.Actors = append(r.Actors, s.verifyActor(name, pending.actors[name], t.actors[name]))
	}
	return r, nil
}

// verifyLog reads the log entry by entry, going on past damaged entries;
// a damaged entry of a format 4 or 5 log is read record by record, and each
// record whose data is damaged (or was lost before) is reported with its
// actor. It returns ctx's error if ctx is done before it is.
func (s *Store) verifyLog(ctx context.Context, r *Report, legacy bool, layout recordLayout, nested bool) error {
	actors := map[string]bool{}
	var stopped error
	err := s.viewTx("reading the log", func(tx *bolt.Tx) error {
		wal := tx.Bucket(walBucket)
		if wal == nil {
			return errors.New("no log bucket")
		}
		next := uint64(0)
		if !legacy {
			start, err := s.readLogStart(tx)
			if err != nil {
				r.Problems = append(r.Problems, err)
			}
			next = start
		}
		c := wal.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if stopped = ctx.Err(); stopped != nil {
				return nil
			}
			if len(k) != 8 {
				r.Problems = append(r.Problems, s.damagedKey(durability.RecordLog, k))
				continue
			}
			seq := decodeIndex(k)
			if !legacy && seq != next {
				r.Problems = append(r.Problems, &durability.DamageError{Store: s.path, What: "log", Offset: -1, Reason: fmt.Sprintf("entries %d to %d missing", next, int64(seq)-1)})
			}
			next = seq + 1
			v, err := s.logEntry(wal, k, v, nested)
			if err != nil {
				r.Problems = append(r.Problems, err)
				continue
			}
			body, err := s.openLogValue(seq, v, legacy)
			entryErr := err
			if err != nil && layout == withSums && len(v) >= crcSize {
				body, err = slices.Clone(v[crcSize:]), nil // record by record
			}
			if err == nil {
				n := 0
				var lost []error
				damagedRecs := 0
				err = decodeFramesWith(body, layout, func(rec record, recErr error) error {
					actors[rec.name] = true
					if recErr != nil {
						damagedRecs++
					}
					if recErr != nil || rec.kind == lostRecord {
						what := "its write in log entry %d is damaged"
						if recErr == nil {
							what = "its write was lost to damage before (log entry %d relogs the loss)"
						}
						kind := durability.RecordEvent
						if rec.kind == putSnapshot || rec.lostSnapshot {
							kind = durability.RecordSnapshot
						}
						lost = append(lost, &durability.StoreError{Op: "verify", Name: rec.name, Err: durability.Damaged(s.path, kind, rec.index, fmt.Sprintf(what, seq))})
						return nil
					}
					n++
					return nil
				})
				switch {
				case err != nil && entryErr != nil:
					err = entryErr
				case err != nil:
					err = durability.Damaged(s.path, durability.RecordLog, seq, err.Error())
				case entryErr != nil && damagedRecs == 0:
					err = s.unexplainedLogDamage(seq, v)
				default:
					r.LogEntries++
					r.LogRecords += n
					r.Problems = append(r.Problems, lost...)
				}
			}
			if err != nil {
				r.Problems = append(r.Problems, err)
			}
		}
		if !legacy && next != wal.Sequence() {
			r.Problems = append(r.Problems, &durability.DamageError{Store: s.path, What: "log", Offset: -1,
				Reason: fmt.Sprintf("holds entries up to %d, its header says %d entries: entries lost", int64(next)-1, wal.Sequence())})
		}
		return nil
	})
	if err != nil {
		r.Problems = append(r.Problems, err)
	}
	for name := range actors {
		r.LogActors = append(r.LogActors, name)
	}
	slices.Sort(r.LogActors)
	return stopped
}

// verifyActor checks every record of one actor's bucket and merges the
// log's writes pending for it (may be nil) on top. An actor whose pages
// are damaged (pages non-nil) is read from its pages, not through bbolt
// (see [rawActor]).
func (s *Store) verifyActor(name string, pending *pendingActor, pages *actorPages) ActorReport {
	a := ActorReport{Name: name}
	var stored [2][]uint64 // the intact stored indexes, events then snapshots
	if pages != nil {
		a.Pages = true
		a.Damaged = append(a.Damaged, pages.err)
		events, snapshots, err := s.rawActor(pages.header, pages.skip)
		if err != nil {
			a.Damaged = append(a.Damaged, err)
		}
		for k, elems := range [][]rawElem{events, snapshots} {
			kind := durability.RecordEvent
			if k == 1 {
				kind = durability.RecordSnapshot
			}
			check := checker{kind: kind, name: name}
			for _, e := range elems {
				if len(e.key) != 8 {
					a.Damaged = append(a.Damaged, s.damagedKey(kind, e.key))
					continue
				}
				if _, err := s.openValue(&check, decodeIndex(e.key), e.value); err != nil {
					a.Damaged = append(a.Damaged, err)
					continue
				}
				stored[k] = append(stored[k], decodeIndex(e.key))
			}
		}
	} else {
		err := s.viewTx("verifying an actor", func(tx *bolt.Tx) error {
			ab := actorBucket(tx, name)
			if ab == nil {
				return nil // only in the log
			}
			sm, err := s.readSummary(ab, name)
			summarized := err == nil && !s.legacy
			if err != nil {
				a.Damaged = append(a.Damaged, err)
			}
			for k, kind := range []durability.RecordKind{durability.RecordEvent, durability.RecordSnapshot} {
				var w walkCheck
				w.first = true
				b := ab.Bucket(bucketFor(kind))
				if b == nil {
					if st := sm.stat(kind); st.count > 0 {
						a.Damaged = append(a.Damaged, &durability.DamageError{Store: s.path, What: kind.String() + "s bucket", Offset: -1, Reason: fmt.Sprintf("missing, its summary says it holds %d", st.count)})
					}
					continue
				}
				check := checker{kind: kind, name: name}
				c := b.Cursor()
				for k2, v := c.First(); k2 != nil; k2, v = c.Next() {
					if len(k2) != 8 {
						a.Damaged = append(a.Damaged, s.damagedKey(kind, k2))
						continue
					}
					i := decodeIndex(k2)
					w.count++
					w.sum += storedSum(v)
					if _, err := s.openValue(&check, i, v); err != nil {
						a.Damaged = append(a.Damaged, err)
						continue
					}
					stored[k] = append(stored[k], i)
				}
				if summarized {
					if err := s.verifyWalk(kind, w, *sm.stat(kind)); err != nil {
						a.Damaged = append(a.Damaged, err)
					}
				}
			}
			return nil
		})
		if err != nil {
			a.Damaged = append(a.Damaged, err)
		}
	}
	// The store serves the bucket's records the log does not hide or
	// replace, and the log's.
	var logs [2]*pendingLog
	if pending != nil {
		logs = [2]*pendingLog{&pending.events, &pending.snapshots}
	}
	for k := range stored {
		idx := stored[k]
		if l := logs[k]; l != nil {
			idx = slices.DeleteFunc(idx, func(i uint64) bool { _, put := l.puts[i]; return l.hides(i) || put })
			for i := range l.puts {
				idx = append(idx, i)
			}
			a.Logged += len(l.puts)
			slices.Sort(idx)
		}
		if len(idx) == 0 {
			continue
		}
		if k == 1 {
			a.Snapshots, a.LastSnapshot = len(idx), idx[len(idx)-1]
			continue
		}
		a.Events, a.FirstEvent, a.LastEvent = len(idx), idx[0], idx[len(idx)-1]
	}
	return a
}

// rawActor reads what is left of the actor bucket whose header (see
// [actorPages]) is given from the store's file, not through bbolt: for an
// actor whose pages are damaged.
func (s *Store) rawActor(header []byte, skip []uint64) (events, snapshots []rawElem, err error) {
	fi, err := s.file.Stat()
	if err != nil {
		return nil, nil, err
	}
	ps := int64(s.db.Info().PageSize)
	events, snapshots = rawActor(s.file, ps, uint64(fi.Size()/ps), header, skip)
	return events, snapshots, nil
}
