package boltstore

import (
	"cmp"
	"slices"
)

// overlay holds the writes that are committed to the write-ahead log but not
// yet checkpointed into the per-actor buckets. The state of an actor is its
// buckets with its overlay applied on top: bucket entries at or below a
// deleted-through mark are hidden, and overlay entries replace bucket
// entries at the same index.
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
	puts map[uint64][]byte
	// deleted says that bucket entries with index <= deletedThrough are
	// gone. Every bucket entry predates every overlay write, so the largest
	// mark is the one that counts.
	deleted        bool
	deletedThrough uint64
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
		a.events.put(r.index, r.data)
	case deleteEvents:
		a.events.deleteThrough(r.index)
	case putSnapshot:
		a.snapshots.put(r.index, r.data)
		if r.compact && r.index > 0 {
			a.events.deleteThrough(r.index - 1)
			a.snapshots.deleteThrough(r.index - 1)
		}
	case deleteSnapshots:
		a.snapshots.deleteThrough(r.index)
	}
}

func (l *pendingLog) put(index uint64, data []byte) {
	if l.puts == nil {
		l.puts = make(map[uint64][]byte)
	}
	l.puts[index] = data
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

// entry is an index with its data.
type entry struct {
	index uint64
	data  []byte
}

// putsIn returns the overlay's entries with from <= index < to (to == 0:
// unbounded), sorted by index.
func (l *pendingLog) putsIn(from, to uint64) []entry {
	var out []entry
	for i, d := range l.puts {
		if i >= from && (to == 0 || i < to) {
			out = append(out, entry{i, d})
		}
	}
	slices.SortFunc(out, func(a, b entry) int { return cmp.Compare(a.index, b.index) })
	return out
}

// latest returns the overlay's entry with the highest index.
func (l *pendingLog) latest() (entry, bool) {
	var best entry
	found := false
	for i, d := range l.puts {
		if !found || i > best.index {
			best, found = entry{i, d}, true
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
