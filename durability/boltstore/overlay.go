package boltstore

import (
	"cmp"
	"maps"
	"slices"
)

// overlay holds the writes that are committed to the write-ahead log but not
// yet checkpointed into the per-actor buckets. The state of an actor is its
// buckets with its overlay applied on top: bucket entries at or below a
// deleted-through mark are hidden, and overlay entries replace bucket
// entries at the same index.
//
// Applying an overlay to buckets that already hold some of its effect
// gives the same state as applying it once (its deletes come before its
// puts, and both are by index): so a checkpoint may move an overlay into
// the buckets a piece per transaction while readers go on merging the
// whole overlay on top, and a crash in the middle replays the log over
// buckets that hold part of it.
//
// An overlay's data is the store's own memory, never bytes of the mapped
// file: a write's records point into the buffer [encodeRecords] copied
// them into (their checksums computed over the caller's bytes), and a
// replayed log's into copies of its values taken once their checksums
// checked (see [Store.replay]). Damage to the file after that cannot
// reach them, so reads return them without checking them again (a read
// of the buckets checks every value, as it reads the file); a
// checkpoint writes each with the checksum computed when it was
// written, so that a copy damaged in memory is found by the first read
// of its bucket.
//
// An overlay is not safe for concurrent use; Store guards it with viewMu.
type overlay struct {
	actors map[string]*pendingActor
	ops    int // writes applied since the last checkpoint
	bytes  int // data bytes held
}

// pendingActor is one actor's part of the overlay.
type pendingActor struct {
	events    pendingLog
	snapshots pendingLog
}

// pendingLog is the overlay of one bucket (events or snapshots).
type pendingLog struct {
	puts map[uint64]put
	// deleted says that bucket entries with index <= deletedThrough are
	// gone. Every bucket entry predates every overlay write, so the largest
	// mark is the one that counts.
	deleted        bool
	deletedThrough uint64
}

// put is an overlay entry: the data and its record checksum
// ([durability.Checksum], as the bucket value will start with).
type put struct {
	data []byte
	sum  uint32
}

func newOverlay() *overlay { return &overlay{actors: make(map[string]*pendingActor)} }

func (o *overlay) actor(name string) *pendingActor {
	a := o.actors[name]
	if a == nil {
		a = &pendingActor{}
		o.actors[name] = a
	}
	return a
}

// apply records a committed write. data must not change afterwards.
func (o *overlay) apply(r record) {
	o.ops++
	o.bytes += len(r.data)
	a := o.actor(r.name)
	switch r.kind {
	case putEvent:
		a.events.put(r.index, put{r.data, r.sum})
	case deleteEvents:
		a.events.deleteThrough(r.index)
	case putSnapshot:
		a.snapshots.put(r.index, put{r.data, r.sum})
		if r.compact && r.index > 0 {
			a.events.deleteThrough(r.index - 1)
			a.snapshots.deleteThrough(r.index - 1)
		}
	case deleteSnapshots:
		a.snapshots.deleteThrough(r.index)
	}
}

func (l *pendingLog) put(index uint64, p put) {
	if l.puts == nil {
		l.puts = make(map[uint64]put)
	}
	l.puts[index] = p
}

func (l *pendingLog) deleteThrough(through uint64) {
	for i := range l.puts {
		if i <= through {
			delete(l.puts, i)
		}
	}
	if !l.deleted || through > l.deletedThrough {
		l.deleted, l.deletedThrough = true, through
	}
}

// hides reports whether the overlay hides the bucket entry at index.
func (l *pendingLog) hides(index uint64) bool {
	return l.deleted && index <= l.deletedThrough
}

// then returns the overlay of l followed by next: l's deletes and the
// puts next does not hide, then next's.
func (l *pendingLog) then(next *pendingLog) pendingLog {
	out := pendingLog{deleted: l.deleted || next.deleted, deletedThrough: l.deletedThrough}
	if next.deleted && (!l.deleted || next.deletedThrough > l.deletedThrough) {
		out.deletedThrough = next.deletedThrough
	}
	if len(l.puts)+len(next.puts) > 0 {
		out.puts = make(map[uint64]put, len(l.puts)+len(next.puts))
		for i, p := range l.puts {
			if !next.hides(i) {
				out.puts[i] = p
			}
		}
		maps.Copy(out.puts, next.puts)
	}
	return out
}

// then returns a's overlay followed by next's; either may be nil.
func (a *pendingActor) then(next *pendingActor) *pendingActor {
	switch {
	case a == nil:
		return next
	case next == nil:
		return a
	}
	return &pendingActor{events: a.events.then(&next.events), snapshots: a.snapshots.then(&next.snapshots)}
}

// records returns writes that, applied to an empty overlay, give a's
// overlay: its deletes, then its puts. The records' data alias a's.
func (a *pendingActor) records(name string, lost []record) []record {
	var out []record
	for _, l := range []struct {
		p        *pendingLog
		put, del writeKind
	}{{&a.events, putEvent, deleteEvents}, {&a.snapshots, putSnapshot, deleteSnapshots}} {
		if l.p.deleted {
			out = append(out, record{kind: l.del, name: name, index: l.p.deletedThrough})
		}
		for _, r := range lost {
			if r.lostSnapshot == (l.put == putSnapshot) {
				out = append(out, r)
			}
		}
		for _, e := range l.p.putsIn(0, 0) {
			out = append(out, record{kind: l.put, name: name, index: e.index, data: e.data, sum: e.sum})
		}
	}
	return out
}

// log returns a's pending log of snapshots, or of events.
func (a *pendingActor) log(snapshots bool) *pendingLog {
	if snapshots {
		return &a.snapshots
	}
	return &a.events
}

// droppedLost reports whether Salvage drops r, a lostRecord of a's
// actor, as a record of its own: unless a later write of a replaced it
// (a put at its index) or deleted it (a delete that covers its index,
// written after it: r.lostAfter says that r was written after every
// delete that covers it, see [quarantined.deleted]). a may be nil.
func (a *pendingActor) droppedLost(r record) bool {
	if a == nil {
		return true
	}
	l := a.log(r.lostSnapshot)
	if _, put := l.puts[r.index]; put {
		return false
	}
	return !l.hides(r.index) || r.lostAfter
}

// entry is an index with its data (and, from an overlay, its checksum).
type entry struct {
	index uint64
	data  []byte
	sum   uint32
}

// putsIn returns the overlay's entries with from <= index < to (to == 0:
// unbounded), sorted by index.
func (l *pendingLog) putsIn(from, to uint64) []entry {
	var out []entry
	for i, p := range l.puts {
		if i >= from && (to == 0 || i < to) {
			out = append(out, entry{i, p.data, p.sum})
		}
	}
	slices.SortFunc(out, func(a, b entry) int { return cmp.Compare(a.index, b.index) })
	return out
}

// latest returns the overlay's entry with the highest index.
func (l *pendingLog) latest() (entry, bool) {
	var best entry
	found := false
	for i, p := range l.puts {
		if !found || i > best.index {
			best, found = entry{i, p.data, p.sum}, true
		}
	}
	return best, found
}

// merge combines sorted bucket entries with sorted overlay entries, the
// overlay winning on equal indexes.
func merge(bucket, pending []entry) []entry {
	if len(pending) == 0 {
		return bucket
	}
	out := make([]entry, 0, len(bucket)+len(pending))
	for len(bucket) > 0 && len(pending) > 0 {
		switch b, p := bucket[0], pending[0]; {
		case b.index < p.index:
			out, bucket = append(out, b), bucket[1:]
		case b.index > p.index:
			out, pending = append(out, p), pending[1:]
		default:
			out, bucket, pending = append(out, p), bucket[1:], pending[1:]
		}
	}
	out = append(out, bucket...)
	return append(out, pending...)
}
