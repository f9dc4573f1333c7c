package boltstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
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

// encode returns the record's log value in a new buffer, and r with its data
// pointing into that buffer, so that the store keeps no caller memory.
func (r record) encode() ([]byte, record) {
	b := make([]byte, 0, 2+binary.MaxVarintLen64+len(r.name)+8+len(r.data))
	var flags byte
	if r.compact {
		flags |= flagCompact
	}
	b = append(b, byte(r.kind), flags)
	b = binary.AppendUvarint(b, uint64(len(r.name)))
	b = append(b, r.name...)
	b = binary.BigEndian.AppendUint64(b, r.index)
	b = append(b, r.data...)
	r.data = b[len(b)-len(r.data):]
	return b, r
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

// appendFrame appends one framed record to a log value: the record's
// length (uvarint), then the record.
func appendFrame(b, rec []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(rec)))
	return append(b, rec...)
}

// decodeFrames calls fn with each record framed in a log value, in order;
// the records' data alias v.
func decodeFrames(v []byte, fn func(record)) error {
	for i := 0; len(v) > 0; i++ {
		n, size := binary.Uvarint(v)
		if size <= 0 || n > uint64(len(v)-size) {
			return fmt.Errorf("record %d: bad frame length", i)
		}
		r, err := decodeRecord(v[size : size+int(n)])
		if err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		fn(r)
		v = v[size+int(n):]
	}
	return nil
}

// replay reads the write-ahead log left by the last run into a new overlay
// and returns it with the next free log sequence number.
func replay(db *bolt.DB) (*overlay, uint64, error) {
	o := newOverlay()
	var next uint64
	err := db.View(func(tx *bolt.Tx) error {
		wal := tx.Bucket(walBucket)
		if wal == nil {
			return nil
		}
		c := wal.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if err := decodeFrames(slices.Clone(v), o.apply); err != nil {
				return fmt.Errorf("log entry %d: %w", decodeIndex(k), err)
			}
			next = decodeIndex(k) + 1
		}
		return nil
	})
	return o, next, err
}

// checkpoint moves the overlay into the per-actor buckets and empties the
// write-ahead log, in one transaction. It holds viewMu so that readers see
// either the state before or the state after.
func (s *Store) checkpoint() error {
	s.viewMu.Lock()
	defer s.viewMu.Unlock()
	if s.overlay.ops == 0 {
		return nil
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		for name, a := range s.overlay.actors {
			if err := flush(tx, name, eventsBucket, &a.events); err != nil {
				return err
			}
			if err := flush(tx, name, snapshotsBucket, &a.snapshots); err != nil {
				return err
			}
		}
		if err := tx.DeleteBucket(walBucket); err != nil {
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

// flush applies one pending log to its bucket.
func flush(tx *bolt.Tx, name string, which []byte, l *pendingLog) error {
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
		if err := b.Put(indexKey(e.index), e.data); err != nil {
			return err
		}
	}
	return nil
}
