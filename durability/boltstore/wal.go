package boltstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/polyweave/polyweave-go/durability"
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
	if binary.BigEndian.Uint32(v) != durability.Checksum(durability.RecordLog, "", seq, v[crcSize:]) {
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
		for name, a := range s.overlay.actors {
			if err := flush(tx, name, durability.RecordEvent, &a.events, &arena); err != nil {
				return err
			}
			if err := flush(tx, name, durability.RecordSnapshot, &a.snapshots, &arena); err != nil {
				return err
			}
		}
		if err := tx.DeleteBucket(walBucket); err != nil && !errors.Is(err, bolterrors.ErrBucketNotFound) {
			return err
		}
		_, err := tx.CreateBucket(walBucket)
		return err
	})
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	s.log.Debug("boltstore checkpoint", "writes", s.overlay.ops, "bytes", s.overlay.bytes, "actors", len(s.overlay.actors))
	s.overlay = newOverlay()
	return nil
}

// upgrade rewrites a version 2 (or 1) file as version 3: every bucket
// value gets its checksum, the replayed log is checkpointed and the format
// key set, in one transaction, so a crash leaves the old file or the new.
func (s *Store) upgrade() error {
	return s.checkpointWith(func(tx *bolt.Tx) error {
		actors := tx.Bucket(actorsBucket)
		var names [][]byte
		if err := actors.ForEach(func(k, v []byte) error {
			if v == nil {
				names = append(names, k)
			}
			return nil
		}); err != nil {
			return err
		}
		for _, name := range names {
			for _, which := range []struct {
				bucket []byte
				kind   durability.RecordKind
			}{{eventsBucket, durability.RecordEvent}, {snapshotsBucket, durability.RecordSnapshot}} {
				b := sub(tx, string(name), which.bucket)
				if b == nil {
					continue
				}
				type kv struct{ k, v []byte }
				var all []kv
				c := b.Cursor()
				for k, v := c.First(); k != nil; k, v = c.Next() {
					if len(k) != 8 || v == nil {
						return s.damagedKey(which.kind, k)
					}
					all = append(all, kv{slices.Clone(k), sealValue(nil, which.kind, string(name), decodeIndex(k), v)})
				}
				for _, e := range all {
					if err := b.Put(e.k, e.v); err != nil {
						return err
					}
				}
			}
		}
		return tx.Bucket(metaBucket).Put(formatKey, []byte(formatVersion))
	})
}

// flush applies one pending log to its bucket, sealing the values into
// *arena.
func flush(tx *bolt.Tx, name string, kind durability.RecordKind, l *pendingLog, arena *[]byte) error {
	which := eventsBucket
	if kind == durability.RecordSnapshot {
		which = snapshotsBucket
	}
	if len(l.puts) == 0 {
		if l.deleted {
			return deleteThrough(sub(tx, name, which), l.deletedThrough)
		}
		return nil
	}
	b, err := createSub(tx, name, which)
	if err != nil {
		return err
	}
	if l.deleted {
		if err := deleteThrough(b, l.deletedThrough); err != nil {
			return err
		}
	}
	for _, e := range l.putsIn(0, 0) {
		start := len(*arena)
		*arena = sealValue(*arena, kind, name, e.index, e.data)
		if err := b.Put(indexKey(e.index), (*arena)[start:len(*arena):len(*arena)]); err != nil {
			return err
		}
	}
	return nil
}
