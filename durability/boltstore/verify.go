package boltstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

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

	LogEntries int // log entries (commits not yet checkpointed) that are intact
	LogRecords int // records in those entries
	LogActors  []string

	Actors []ActorReport
}

// ActorReport is what Verify found of one actor bucket.
type ActorReport struct {
	Name string

	Events                int    // intact events
	FirstEvent, LastEvent uint64 // indexes of the first and last intact event
	Snapshots             int    // intact snapshots
	LastSnapshot          uint64 // index of the newest intact snapshot

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
// used.
//
// A file that a running store holds (its lock is still taken after
// opts.OpenTimeout) is verified from a copy: Verify copies the file
// until a copy is consistent (no commit finished while it was taken: the
// meta pages are the same before and after, and bbolt does not reuse a
// page of the tree a meta page names before two more commits), verifies
// the copy and says so in [Report].Copy. The copy shows the store as of
// one commit, with its log not yet checkpointed.
//
// The error is for failures to read the file at all (it does not exist,
// it is locked and changes too often for a consistent copy); damage is in
// the report.
func Verify(path string, opts *Options) (*Report, error) {
	o := Options{OpenTimeout: DefaultOpenTimeout}
	if opts != nil && opts.OpenTimeout > 0 {
		o.OpenTimeout = opts.OpenTimeout
	}
	o.ReadOnly, o.MetaFallback, o.FileMode = true, true, DefaultFileMode
	r, err := verifyFile(path, path, &o)
	if !errors.Is(err, durability.ErrLocked) {
		return r, err
	}
	tmp, cerr := consistentCopy(path)
	if cerr != nil {
		return nil, fmt.Errorf("%w; %w", err, cerr)
	}
	defer os.Remove(tmp)
	r, err = verifyFile(tmp, path, &o)
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

// consistentCopy copies the store file at path, which a running store may
// be committing to, into a temporary file until a copy is consistent: the
// bytes of both meta pages are the same before and after the copy. It
// returns the copy's path.
func consistentCopy(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
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
		return "", err
	}
	defer tmp.Close()
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
		if _, err := io.Copy(tmp, io.NewSectionReader(f, 0, 1<<62)); err != nil {
			break
		}
		after, err := metas()
		if err != nil {
			break
		}
		if bytes.Equal(before, after) {
			return tmp.Name(), nil
		}
	}
	os.Remove(tmp.Name())
	return "", fmt.Errorf("no consistent copy in %d attempts (the store commits while each copy is taken): stop the process holding it, or verify it when it is idle", copyAttempts)
}

// verifyFile is Verify of the file at path, reported as name.
func verifyFile(path, name string, o *Options) (*Report, error) {
	r := &Report{Path: name}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if _, err := validateFile(f, name, false); err != nil {
		r.Problems = append(r.Problems, err)
	}
	f.Close()
	db, _, err := openBolt(path, o, os.OpenFile)
	if errors.Is(err, durability.ErrLocked) {
		return nil, err
	}
	if err != nil {
		r.Problems = nil
		r.Unreadable = err
		return r, nil
	}
	defer db.Close()
	s := &Store{db: db, path: name}
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
	if legacy && r.Format != formatVersionV2 && r.Format != formatVersionV1 {
		r.Unreadable = fmt.Errorf("unsupported file format %q", r.Format)
		return r, nil
	}
	if !legacy {
		if err := s.viewTx("checking the actors", s.checkDirectory); err != nil {
			r.Problems = append(r.Problems, err)
		}
	}
	s.verifyLog(r, legacy, layout, nested)
	var names []string
	err = s.viewTx("listing the actors", func(tx *bolt.Tx) error {
		return tx.Bucket(actorsBucket).ForEach(func(k, v []byte) error {
			if v == nil {
				names = append(names, string(k))
			}
			return nil
		})
	})
	if err != nil {
		r.Problems = append(r.Problems, err)
	}
	for _, name := range names {
		r.Actors = append(r.Actors, s.verifyActor(name))
	}
	return r, nil
}

// verifyLog reads the log entry by entry, going on past damaged entries;
// a damaged entry of a format 4 or 5 log is read record by record, and each
// record whose data is damaged (or was lost before) is reported with its
// actor.
func (s *Store) verifyLog(r *Report, legacy bool, layout recordLayout, nested bool) {
	actors := map[string]bool{}
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
}

// verifyActor checks every record of one actor bucket.
func (s *Store) verifyActor(name string) ActorReport {
	a := ActorReport{Name: name}
	err := s.viewTx("verifying an actor", func(tx *bolt.Tx) error {
		ab := actorBucket(tx, name)
		if ab == nil {
			return errors.New("actor bucket vanished")
		}
		sm, err := s.readSummary(ab, name)
		summarized := err == nil && !s.legacy
		if err != nil {
			a.Damaged = append(a.Damaged, err)
		}
		for _, kind := range []durability.RecordKind{durability.RecordEvent, durability.RecordSnapshot} {
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
			for k, v := c.First(); k != nil; k, v = c.Next() {
				if len(k) != 8 {
					a.Damaged = append(a.Damaged, s.damagedKey(kind, k))
					continue
				}
				i := decodeIndex(k)
				w.count++
				w.sum += storedSum(v)
				if _, err := s.openValue(&check, i, v); err != nil {
					a.Damaged = append(a.Damaged, err)
					continue
				}
				if kind == durability.RecordSnapshot {
					a.Snapshots++
					a.LastSnapshot = i
					continue
				}
				if a.Events == 0 {
					a.FirstEvent = i
				}
				a.Events++
				a.LastEvent = i
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
	return a
}
