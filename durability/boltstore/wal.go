package boltstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/internal/benchhook"
)

// record is one write as the write-ahead log stores it.
type record struct {
	kind    writeKind
	compact bool // putSnapshot only: also delete what the snapshot covers
	name    string
	index   uint64
	data    []byte
}

// Record layout: kind (1 byte), flags (1 byte, bit 0 = compact), name length
// (uvarint), name, index (8 bytes big-endian), data (the rest).
const flagCompact = 1

// size returns the length of the record's encoding.
func (r record) size() int {
	return 2 + uvarintLen(uint64(len(r.name))) + len(r.name) + 8 + len(r.data)
}

// appendTo appends the record's encoding to b.
func (r record) appendTo(b []byte) []byte {
	var flags byte
	if r.compact {
		flags |= flagCompact
	}
	b = append(b, byte(r.kind), flags)
	b = binary.AppendUvarint(b, uint64(len(r.name)))
	b = append(b, r.name...)
	b = binary.BigEndian.AppendUint64(b, r.index)
	return append(b, r.data...)
}

// encodeRecords frames recs, in order, into one new buffer (each as
// its length as a uvarint, then the record) and points each record's data into that buffer, so
// that the store keeps no caller memory.
func encodeRecords(recs []record) []byte {
	n := 0
	for _, r := range recs {
		size := r.size()
		n += uvarintLen(uint64(size)) + size
	}
	b := make([]byte, 0, n)
	for i, r := range recs {
		b = binary.AppendUvarint(b, uint64(r.size()))
		b = r.appendTo(b)
		recs[i].data = b[len(b)-len(r.data) : len(b) : len(b)]
	}
	return b
}

// uvarintLen is the length of v's uvarint encoding.
func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// nextFrame splits the first framed record off a log value: frame is the
// framing and the record, rest what follows.
func nextFrame(v []byte) (frame, rest []byte, err error) {
	n, size := binary.Uvarint(v)
	if size <= 0 || n > uint64(len(v)-size) {
		return nil, nil, errors.New("bad frame length")
	}
	return v[:size+int(n)], v[size+int(n):], nil
}

// decodeRecord parses a log value; the record's data aliases b.
func decodeRecord(b []byte) (record, error) {
	if len(b) < 2 || writeKind(b[0]) > deleteSnapshots {
		return record{}, errors.New("bad record header")
	}
	r := record{kind: writeKind(b[0]), compact: b[1]&flagCompact != 0}
	n, size := binary.Uvarint(b[2:])
	rest := b[2:]
	if size <= 0 || n > uint64(len(rest)-size) || uint64(len(rest)-size)-n < 8 {
		return record{}, errors.New("truncated record")
	}
	rest = rest[size:]
	r.name = string(rest[:n])
	r.index = binary.BigEndian.Uint64(rest[n : n+8])
	r.data = rest[n+8:]
	return r, nil
}

// decodeFrames calls fn with each record framed in a log value, in order;
// the records' data alias v.
func decodeFrames(v []byte, fn func(record)) error {
	for i := 0; len(v) > 0; i++ {
		frame, rest, err := nextFrame(v)
		if err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		_, size := binary.Uvarint(frame)
		r, err := decodeRecord(frame[size:])
		if err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		fn(r)
		v = rest
	}
	return nil
}

// replay reads the write-ahead log left by the last run into a new overlay
// and returns it with the next free log sequence number. Each log value's
// checksum is checked (legacy: a version 2 or 1 file, whose log values
// carry none), and a damaged one stops the replay with an error naming it:
// the store does not start from a log it cannot read whole.
func (s *Store) replay(legacy bool) (*overlay, uint64, error) {
	o := newOverlay()
	var next uint64
	err := s.viewTx("replaying the log", func(tx *bolt.Tx) error {
		wal := tx.Bucket(walBucket)
		if wal == nil {
			if legacy {
				return nil
			}
			return fmt.Errorf("no %q bucket: not a store file, or its root is damaged", walBucket)
		}
		c := wal.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if len(k) != 8 {
				return s.damagedKey(durability.RecordLog, k)
			}
			seq := decodeIndex(k)
			if !legacy && seq != next {
				return &durability.DamageError{Store: s.path, What: "log", Index: next, HasIndex: true, Offset: s.fileOffset(k),
					Reason: fmt.Sprintf("entry %d is followed by entry %d: entries lost", int64(next)-1, seq)}
			}
			body, err := s.openLogValue(seq, v, legacy)
			if err != nil {
				return err
			}
			if err := decodeFrames(body, o.apply); err != nil {
				e := durability.Damaged(s.path, durability.RecordLog, seq, err.Error())
				e.Offset = s.fileOffset(v)
				return e
			}
			next = seq + 1
		}
		if !legacy && next != wal.Sequence() {
			return &durability.DamageError{Store: s.path, What: "log", Offset: -1,
				Reason: fmt.Sprintf("holds %d entries, its header says %d: entries lost", next, wal.Sequence())}
		}
		return nil
	})
	return o, next, err
}

// openLogValue checks a log value (v aliases the mapped file) and returns
// a copy of the records framed in it.
func (s *Store) openLogValue(seq uint64, v []byte, legacy bool) ([]byte, error) {
	if v == nil {
		return nil, s.damagedValue(durability.RecordLog, seq, v, "a nested bucket where a value belongs")
	}
	if legacy {
		return slices.Clone(v), nil
	}
	if len(v) < crcSize {
		return nil, s.damagedValue(durability.RecordLog, seq, v, "shorter than its checksum")
	}
	if !benchhook.ChecksumsOff.Load() && binary.BigEndian.Uint32(v) != durability.Checksum(durability.RecordLog, "", seq, v[crcSize:]) {
		return nil, s.damagedValue(durability.RecordLog, seq, v, "checksum mismatch")
	}
	return slices.Clone(v[crcSize:]), nil
}

// checkpoint moves the overlay into the per-actor buckets and empties the
// write-ahead log, in one transaction. It holds viewMu so that readers see
// either the state before or the state after.
func (s *Store) checkpoint() error { return s.checkpointWith(nil) }

// checkpointWith is checkpoint with before run first in its transaction.
func (s *Store) checkpointWith(before func(*bolt.Tx) error) error {
	s.viewMu.Lock()
	defer s.viewMu.Unlock()
	if s.overlay.ops == 0 && before == nil {
		return nil
	}
	// bbolt keeps the values put in a transaction until it commits: they
	// are sealed into one buffer made for this checkpoint.
	arena := make([]byte, 0, s.overlay.bytes+crcSize*s.overlay.ops)
	err := s.updateTx("checkpointing", func(tx *bolt.Tx) error {
		if before != nil {
			if err := before(tx); err != nil {
				return err
			}
		}
		dir, err := s.readDirectory(tx)
		if err != nil {
			return err
		}
		old := dir
		for name, a := range s.overlay.actors {
			if err := s.flushActor(tx, name, a, &arena, &dir); err != nil {
				return fmt.Errorf("actor %q: %w", name, err)
			}
		}
		if dir != old {
			if err := writeDirectory(tx, dir); err != nil {
				return err
			}
		}
		if err := tx.DeleteBucket(walBucket); err != nil && !errors.Is(err, bolterrors.ErrBucketNotFound) {
			return err
		}
		_, err = tx.CreateBucket(walBucket)
		return err
	})
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	s.log.Debug("boltstore checkpoint", "writes", s.overlay.ops, "bytes", s.overlay.bytes, "actors", len(s.overlay.actors))
	s.overlay = newOverlay()
	s.nextSeq = 0 // the log starts again, empty
	return nil
}

// upgrade rewrites a version 2 (or 1) file as version 3: every bucket
// value gets its checksum, every actor bucket its summary and the actors
// bucket its directory summary, the replayed log is checkpointed and the
// format key set, in one transaction, so a crash leaves the old file or
// the new.
func (s *Store) upgrade() error {
	return s.checkpointWith(func(tx *bolt.Tx) error {
		actors := tx.Bucket(actorsBucket)
		var names [][]byte
		if err := actors.ForEach(func(k, v []byte) error {
			if v == nil {
				names = append(names, slices.Clone(k))
			}
			return nil
		}); err != nil {
			return err
		}
		for _, name := range names {
			ab := actors.Bucket(name)
			var sm summary
			for _, kind := range []durability.RecordKind{durability.RecordEvent, durability.RecordSnapshot} {
				b := ab.Bucket(bucketFor(kind))
				if b == nil {
					continue
				}
				type kv struct{ k, v []byte }
				var all []kv
				c := b.Cursor()
				for k, v := c.First(); k != nil; k, v = c.Next() {
					if len(k) != 8 || v == nil {
						return s.damagedKey(kind, k)
					}
					all = append(all, kv{slices.Clone(k), sealValue(nil, kind, string(name), decodeIndex(k), v)})
				}
				st := sm.stat(kind)
				for _, e := range all {
					if err := b.Put(e.k, e.v); err != nil {
						return err
					}
					st.count++
					st.sum += storedSum(e.v)
				}
				if len(all) > 0 {
					st.min, st.max = decodeIndex(all[0].k), decodeIndex(all[len(all)-1].k)
				}
			}
			if err := ab.Put(summaryKey, encodeSummary(string(name), sm)); err != nil {
				return err
			}
		}
		dir, err := s.scanDirectory(tx)
		if err != nil {
			return err
		}
		if err := writeDirectory(tx, dir); err != nil {
			return err
		}
		return tx.Bucket(metaBucket).Put(formatKey, []byte(formatVersion))
	})
}

// bucketFor returns the name of the sub-bucket holding records of kind.
func bucketFor(kind durability.RecordKind) []byte {
	if kind == durability.RecordSnapshot {
		return snapshotsBucket
	}
	return eventsBucket
}

// flushActor applies name's overlay to its actor bucket, sealing values
// into *arena and keeping the bucket's summary and the directory's: a new
// actor bucket is added to dir, one left empty is deleted from the file
// and from dir.
func (s *Store) flushActor(tx *bolt.Tx, name string, a *pendingActor, arena *[]byte, dir *directory) error {
	actors := tx.Bucket(actorsBucket)
	ab := actors.Bucket([]byte(name))
	var sm summary
	if ab == nil {
		if len(a.events.puts) == 0 && len(a.snapshots.puts) == 0 {
			return nil // deletes of what is not there
		}
		var err error
		if ab, err = actors.CreateBucket([]byte(name)); err != nil {
			return err
		}
		dir.count++
		dir.sum += nameSum([]byte(name))
	} else {
		var err error
		if sm, err = s.readSummary(ab, name); err != nil {
			return err
		}
	}
	if err := s.flushBucket(ab, durability.RecordEvent, name, &a.events, &sm.events, arena); err != nil {
		return err
	}
	if err := s.flushBucket(ab, durability.RecordSnapshot, name, &a.snapshots, &sm.snapshots, arena); err != nil {
		return err
	}
	if sm.events.count == 0 && sm.snapshots.count == 0 {
		dir.count--
		dir.sum -= nameSum([]byte(name))
		return actors.DeleteBucket([]byte(name))
	}
	return ab.Put(summaryKey, encodeSummary(name, sm))
}

// flushBucket applies one pending log to the sub-bucket of ab for kind,
// keeping st.
func (s *Store) flushBucket(ab *bolt.Bucket, kind durability.RecordKind, name string, l *pendingLog, st *bucketStat, arena *[]byte) error {
	which := bucketFor(kind)
	b := ab.Bucket(which)
	if b == nil && st.count > 0 {
		return &durability.DamageError{Store: s.path, What: kind.String() + "s bucket", Offset: -1, Reason: fmt.Sprintf("missing, its summary says it holds %d", st.count)}
	}
	if l.deleted && b != nil {
		// Collect first: deleting while a cursor walks the bucket can skip keys.
		var keys [][]byte
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if len(k) != 8 {
				return s.damagedKey(kind, k)
			}
			if decodeIndex(k) > l.deletedThrough {
				break
			}
			keys = append(keys, slices.Clone(k))
			st.count--
			st.sum -= storedSum(v)
		}
		for _, k := range keys {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
	}
	if len(l.puts) > 0 && b == nil {
		var err error
		if b, err = ab.CreateBucket(which); err != nil {
			return err
		}
	}
	for _, e := range l.putsIn(0, 0) {
		key := indexKey(e.index)
		if old := b.Get(key); old != nil {
			st.sum -= storedSum(old)
		} else {
			st.count++
		}
		start := len(*arena)
		*arena = sealValue(*arena, kind, name, e.index, e.data)
		v := (*arena)[start:len(*arena):len(*arena)]
		if err := b.Put(key, v); err != nil {
			return err
		}
		st.sum += storedSum(v)
	}
	if b == nil {
		return nil
	}
	if st.count == 0 {
		*st = bucketStat{}
		return ab.DeleteBucket(which)
	}
	c := b.Cursor()
	first, _ := c.First()
	last, _ := c.Last()
	if len(first) != 8 || len(last) != 8 {
		return &durability.DamageError{Store: s.path, What: kind.String() + "s bucket", Offset: -1, Reason: "its first or last key is not an index"}
	}
	st.min, st.max = decodeIndex(first), decodeIndex(last)
	return nil
}
