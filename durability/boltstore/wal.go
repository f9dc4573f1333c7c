package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/internal/quote"
	"github.com/polyweave/polyweave-go/internal/benchhook"
)

// logStartKey, in the meta bucket, holds the first key of the log while a
// checkpoint moves its oldest entries into the buckets a piece per commit
// (see [Store.planSteps]): CRC-32C, then the key (8 bytes). Absent means 0.
var logStartKey = []byte("logstart")

// logStartKind is the checksum kind of the log start value.
const logStartKind durability.RecordKind = 0x43

// readLogStart returns the log's first key.
func (s *Store) readLogStart(tx *bolt.Tx) (uint64, error) {
	v := tx.Bucket(metaBucket).Get(logStartKey)
	if v == nil {
		return 0, nil
	}
	if len(v) != crcSize+8 || !benchhook.ChecksumsOff.Load() && binary.BigEndian.Uint32(v) != durability.Checksum(logStartKind, "", 0, v[crcSize:]) {
		return 0, &durability.DamageError{Store: s.path, What: "log start", Offset: s.fileOffset(v), Reason: "checksum mismatch"}
	}
	return binary.BigEndian.Uint64(v[crcSize:]), nil
}

// writeLogStart stores the log's first key (deleting the key for 0).
func writeLogStart(tx *bolt.Tx, seq uint64) error {
	if seq == 0 {
		return tx.Bucket(metaBucket).Delete(logStartKey)
	}
	return tx.Bucket(metaBucket).Put(logStartKey, sealValue(nil, logStartKind, "", 0, binary.BigEndian.AppendUint64(nil, seq)))
}

// bigLogValue is the size above which a log value is stored as the one
// value of a nested bucket under its key (format 5) rather than as the
// key's value. bbolt rewrites a whole leaf page, overflow included, when
// it adds a key to it, and splits a leaf only once it holds 5 keys: a
// large value inline in the log's last leaf is rewritten by each of the
// next 3 or 4 commits (a 1 MiB streamed argument then costs 4 to 5 MiB of
// page writes). A nested bucket too large to be inlined (over a quarter
// page) has its own root page, which later commits leave alone: the
// log's leaf holds its 16-byte header. That costs a page of its own and
// one more page read at replay, so small values, which share the last
// leaf's pages, stay inline: 16 KiB is 4 pages of 4 KiB, above which the
// rewrites it saves (up to 4 times the value) outweigh the page it costs.
const bigLogValue = 16 << 10

// putLogValue stores sealed log value v under key in wal: inline, or, when
// larger than bigLogValue, as the one value, under the same key, of a
// nested bucket under key.
func putLogValue(wal *bolt.Bucket, key, v []byte) error {
	if len(v) <= bigLogValue {
		return wal.Put(key, v)
	}
	b, err := wal.CreateBucket(key)
	if err != nil {
		return err
	}
	return b.Put(key, v)
}

// logEntry returns the value of log entry k, v being what wal holds under
// k: v itself, or for a nested bucket (v nil) where nested values are
// allowed (format 5), the value it holds (see [putLogValue]). A nested
// bucket where none belongs is left to [Store.openLogValue] to report.
func (s *Store) logEntry(wal *bolt.Bucket, k, v []byte, nested bool) ([]byte, error) {
	if v != nil || !nested {
		return v, nil
	}
	seq := decodeIndex(k)
	b := wal.Bucket(k)
	if b == nil {
		return nil, s.damagedValue(durability.RecordLog, seq, k, "neither a value nor a nested bucket")
	}
	c := b.Cursor()
	k1, v1 := c.First()
	if k1 == nil || v1 == nil || !bytes.Equal(k1, k) {
		return nil, s.damagedValue(durability.RecordLog, seq, k1, "its nested bucket does not hold its value under its key")
	}
	if k2, _ := c.Next(); k2 != nil {
		return nil, s.damagedValue(durability.RecordLog, seq, k2, "its nested bucket holds more than its value")
	}
	return v1, nil
}

// deleteLogEntry deletes log entry key from wal, inline or nested.
func deleteLogEntry(wal *bolt.Bucket, key []byte) error {
	err := wal.Delete(key)
	if errors.Is(err, bolterrors.ErrIncompatibleValue) {
		err = wal.DeleteBucket(key)
	}
	return err
}

// quarantined is an actor whose stored state is found damaged while the
// store moves its writes from the log into its bucket, or whose writes in
// the log are damaged. The rest of the store goes on: the actor's reads
// and writes fail with err (a *durability.DamageError naming what is
// damaged), its writes that are intact stay in the log (relogged at each
// checkpoint, with a lostRecord for each put whose data was lost), and
// [Store.Salvage] repairs it.
type quarantined struct {
	err  *durability.DamageError
	lost []record // lostRecord records

	// pages, when set, says that the actor's own pages in the file are
	// damaged (see [checkTree]): bbolt must never read its bucket, and
	// Salvage reads what is left from this copy of its bucket's header.
	pages []byte
	skip  []uint64 // pages left out of reads of pages, see [actorPages]
}

// deleted notes that rec, replayed after the lost records of q's actor
// (q may be nil), deletes those it covers: a put lost after a delete
// that covered it is then deleted by rec, not dropped by Salvage (see
// [pendingActor.droppedLost]).
func (q *quarantined) deleted(rec record) {
	if q == nil {
		return
	}
	for i := range q.lost {
		r := &q.lost[i]
		switch {
		case rec.kind == deleteEvents && !r.lostSnapshot, rec.kind == deleteSnapshots && r.lostSnapshot:
			r.lostAfter = r.lostAfter && r.index > rec.index
		case rec.kind == putSnapshot && rec.compact && rec.index > 0:
			r.lostAfter = r.lostAfter && r.index > rec.index-1
		}
	}
}

// entryReplayed, when set (by tests), is called by replay before it
// reads each log entry.
var entryReplayed func()

// replayed is what [Store.replay] read from the log.
type replayed struct {
	overlay     *overlay
	start, next uint64 // the log's first key and the next free one
	quarantine  map[string]*quarantined
}

// replay reads the write-ahead log left by the last run into a new
// overlay. Each log value's checksum is checked (legacy: a version 2 or 1
// file, whose log values carry none). A damaged value of a format 4 or 5 log
// is read record by record: a record whose header checks but whose data
// does not costs its actor alone (quarantined, the record lost); a
// record whose header is damaged, a value that cannot be split into
// records, or entries missing stop the replay with an error naming the
// log entry: the store does not start from a log it cannot attribute.
// Nested says whether a log value may be held by a nested bucket (format
// 5, see [putLogValue]). It stops, with an error wrapping ctx's, when
// ctx is done.
func (s *Store) replay(ctx context.Context, legacy bool, layout recordLayout, nested bool) (replayed, error) {
	r := replayed{overlay: newOverlay(), quarantine: map[string]*quarantined{}}
	err := s.viewTx("replaying the log", func(tx *bolt.Tx) error {
		wal := tx.Bucket(walBucket)
		if wal == nil {
			if legacy {
				return nil
			}
			return fmt.Errorf("no %q bucket: not a store file, or its root is damaged", walBucket)
		}
		if !legacy {
			start, err := s.readLogStart(tx)
			if err != nil {
				return err
			}
			r.start, r.next = start, start
		}
		c := wal.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if ctx.Err() != nil {
				return fmt.Errorf("stopped while replaying the log: %w", stopCause(ctx))
			}
			if entryReplayed != nil {
				entryReplayed()
			}
			if len(k) != 8 {
				return s.damagedKey(durability.RecordLog, k)
			}
			seq := decodeIndex(k)
			if !legacy && seq != r.next {
				return &durability.DamageError{Store: s.path, What: "log", Index: r.next, HasIndex: true, Offset: s.fileOffset(k),
					Reason: fmt.Sprintf("entry %d is followed by entry %d: entries lost", int64(r.next)-1, seq)}
			}
			v, err := s.logEntry(wal, k, v, nested)
			if err != nil {
				return err
			}
			body, err := s.openLogValue(seq, v, legacy)
			if err != nil {
				var de *durability.DamageError
				if layout != withSums || !errors.As(err, &de) || de.Reason != "checksum mismatch" {
					return err
				}
				// Read it record by record: what is damaged may be one
				// record's data.
				body = slices.Clone(v[crcSize:])
			}
			damagedRecs := 0
			derr := decodeFramesWith(body, layout, func(rec record, recErr error) error {
				if recErr != nil {
					damagedRecs++
				}
				if recErr != nil || rec.kind == lostRecord {
					s.lose(r.overlay, r.quarantine, rec, seq)
					return nil
				}
				r.overlay.apply(rec)
				r.quarantine[rec.name].deleted(rec)
				return nil
			})
			if derr == nil && err != nil && damagedRecs == 0 {
				return s.unexplainedLogDamage(seq, v)
			}
			if derr != nil {
				if err != nil {
					de := durability.Damaged(s.path, durability.RecordLog, seq, fmt.Sprintf("checksum mismatch, and it cannot be read record by record (%v)", derr))
					de.Offset = s.fileOffset(v)
					return de
				}
				e := durability.Damaged(s.path, durability.RecordLog, seq, derr.Error())
				e.Offset = s.fileOffset(v)
				return e
			}
			r.next = seq + 1
		}
		if !legacy && r.next != wal.Sequence() {
			return &durability.DamageError{Store: s.path, What: "log", Offset: -1,
				Reason: fmt.Sprintf("holds entries up to %d, its header says %d: entries lost", int64(r.next)-1, wal.Sequence())}
		}
		return nil
	})
	return r, err
}

// unexplainedLogDamage is the error for log entry seq (value v) whose
// checksum fails while each of its records checks: what is damaged is its
// checksum or its length, and a length cut at a record's end would drop
// the records after it unseen, so the entry is not taken.
func (s *Store) unexplainedLogDamage(seq uint64, v []byte) error {
	return s.damagedValue(durability.RecordLog, seq, v, "checksum mismatch, and each of its records checks: its checksum or its length is damaged, records may be lost")
}

// lose records that rec's data was lost (rec is a put whose data failed
// its check, or a lostRecord relogged earlier): rec's actor is
// quarantined; a compacting snapshot still compacts (its header, which
// says so, is intact).
func (s *Store) lose(o *overlay, q map[string]*quarantined, rec record, seq uint64) {
	snapshot := rec.kind == putSnapshot || rec.kind == lostRecord && rec.lostSnapshot
	if rec.kind == putSnapshot && rec.compact && rec.index > 0 {
		o.apply(record{kind: deleteEvents, name: rec.name, index: rec.index - 1})
		o.apply(record{kind: deleteSnapshots, name: rec.name, index: rec.index - 1})
		q[rec.name].deleted(rec)
	}
	what := durability.RecordEvent
	if snapshot {
		what = durability.RecordSnapshot
	}
	lost := record{kind: lostRecord, name: rec.name, index: rec.index, lostSnapshot: snapshot}
	if a := o.actors[rec.name]; a != nil { // an older write at the index is not the state
		l := a.log(snapshot)
		delete(l.puts, rec.index)
		lost.lostAfter = l.hides(rec.index)
	}
	qa := q[rec.name]
	if qa == nil {
		qa = &quarantined{err: durability.Damaged(s.path, what, rec.index, fmt.Sprintf("its write in the log (entry %d) is damaged and lost; the actor is quarantined until Salvage", seq))}
		q[rec.name] = qa
	}
	qa.lost = append(qa.lost, lost)
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

// pending returns name's writes not yet in its bucket: the part of the
// checkpoint under way, then the newer ones. s.viewMu must be held.
func (s *Store) pending(name string) *pendingActor {
	var f *pendingActor
	if s.flushing != nil {
		f = s.flushing.actors[name]
	}
	return f.then(s.overlay.actors[name])
}

// checkpoint moves every write of the log into the per-actor buckets and
// empties the log, in one transaction (Open, Close, Compact, Salvage).
// Readers go on meanwhile: they merge the overlay on top of the buckets
// until the new state is committed, which gives the same result.
func (s *Store) checkpoint() error { return s.checkpointWith(nil) }

// checkpointed, when set (by tests), is called by checkpointWith once its
// transaction has committed.
var checkpointed func()

// checkpointWith is checkpoint with before run first in its transaction.
// An actor found damaged on the way is quarantined and the checkpoint
// done again without it.
func (s *Store) checkpointWith(before func(*bolt.Tx) error) error {
	for {
		steps := append(slices.Clone(s.steps), s.stepsOf(s.overlay, 0)...)
		if len(steps) == 0 && s.flushing == nil && before == nil {
			return nil
		}
		var relog *overlay
		var next uint64
		err := s.updateTx("checkpointing", func(tx *bolt.Tx) error {
			if before != nil {
				if err := before(tx); err != nil {
					return err
				}
			}
			if err := s.flush(tx, steps); err != nil {
				return err
			}
			var err error
			relog, next, err = s.resetLog(tx, "")
			return err
		})
		if s.quarantineFor(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		if checkpointed != nil {
			checkpointed()
		}
		s.log.Debug("boltstore checkpoint", "steps", len(steps), "writes", s.overlay.ops)
		s.viewMu.Lock()
		s.overlay, s.flushing = relog, nil
		s.viewMu.Unlock()
		s.steps, s.nextSeq, s.logStart, s.cut = nil, next, 0, 0
		return nil
	}
}

// quarantineFor quarantines the actor err names if err is damage found in
// one actor's data by a checkpoint, and reports whether it did.
func (s *Store) quarantineFor(err error) bool {
	var ae *actorError
	var de *durability.DamageError
	if !errors.As(err, &ae) || !errors.As(ae.err, &de) {
		return false
	}
	s.log.Error("boltstore: actor quarantined: its stored state is damaged; its reads and writes fail until Salvage, the other actors go on", "path", s.path, "actor", quote.Name(ae.name, "actor name"), "damage", de)
	s.viewMu.Lock()
	if s.quarantine[ae.name] == nil {
		s.quarantine[ae.name] = &quarantined{err: de}
		s.quarantined.Add(1)
	}
	s.viewMu.Unlock()
	s.steps = slices.DeleteFunc(s.steps, func(st step) bool { return st.name == ae.name })
	return true
}

// isQuarantined reports whether name is quarantined (committer only, or
// with viewMu held).
func (s *Store) isQuarantined(name string) bool { return s.quarantine[name] != nil }

// resetLog empties the log in tx and relogs the pending writes of the
// quarantined actors (but except) from key 0, with their lost records. It
// returns the overlay of what it relogged and the next free key.
func (s *Store) resetLog(tx *bolt.Tx, except string) (*overlay, uint64, error) {
	if err := tx.DeleteBucket(walBucket); err != nil && !errors.Is(err, bolterrors.ErrBucketNotFound) {
		return nil, 0, err
	}
	wal, err := tx.CreateBucket(walBucket)
	if err != nil {
		return nil, 0, err
	}
	wal.FillPercent = 1
	if err := writeLogStart(tx, 0); err != nil {
		return nil, 0, err
	}
	o, values := s.relogValues(except)
	for i, v := range values {
		if err := putLogValue(wal, binary.BigEndian.AppendUint64(nil, uint64(i)), sealLogValue(uint64(i), v)); err != nil {
			return nil, 0, err
		}
	}
	return o, uint64(len(values)), wal.SetSequence(uint64(len(values)))
}

// relogValues returns the log values (checksum room first) holding the
// pending writes and lost records of the quarantined actors (but except),
// and their overlay.
func (s *Store) relogValues(except string) (*overlay, [][]byte) {
	o := newOverlay()
	var batch []*write
	names := make([]string, 0, len(s.quarantine))
	for name := range s.quarantine {
		if name != except {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		a := s.pending(name)
		// The lost records first: replay drops what the overlay holds at
		// their indexes, which is older. Those written after the delete
		// that covers them come after it, so that replay tells them
		// apart from those the delete dropped.
		var recs, after []record
		for _, r := range s.quarantine[name].lost {
			if a != nil && a.log(r.lostSnapshot).hides(r.index) && a.droppedLost(r) {
				after = append(after, r)
			} else {
				recs = append(recs, r)
			}
		}
		if a != nil {
			o.actors[name] = a
			recs = append(recs, a.records(name, after)...)
		}
		if len(recs) == 0 {
			continue
		}
		recs = slices.Clone(recs)
		batch = append(batch, &write{recs: recs, enc: encodeRecords(recs)})
	}
	if len(batch) == 0 {
		return o, nil
	}
	values, _ := frameInto(nil, batch)
	return o, values
}

// sealLogValue fills in the checksum of log value v (room for it first)
// for key seq, and returns v.
func sealLogValue(seq uint64, v []byte) []byte {
	var sum uint32
	if !benchhook.ChecksumsOff.Load() {
		sum = durability.Checksum(durability.RecordLog, "", seq, v[crcSize:])
	}
	binary.BigEndian.PutUint32(v, sum)
	return v
}

// upgrade rewrites a version 2 (or 1) file as version 5: every bucket
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
