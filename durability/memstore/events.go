package memstore

import (
	"cmp"
	"slices"

	"github.com/polyweave/polyweave-go/durability"
)

// summerAfter is the number of events above which a read checks them
// with a [durability.Summer].
const summerAfter = 16

// maxGap is the largest run of missing indexes an event log fills with
// empty slots to stay a window.
const maxGap = 64

// eventLog holds one actor's events by index. Actors persist events at
// consecutive indexes and drop them from the oldest on, so the log is
// normally a window: slots[head:] hold the events at indexes base,
// base+1, ..., a nil slot standing for an index without an event. An event
// far from the window (before it, or more than maxGap indexes past its
// end) turns the log into a map, until the log is empty again. The zero
// value is an empty log.
//
// Event data is never nil (see keep), so nil marks an empty slot.
type eventLog struct {
	slots  [][]byte
	head   int
	base   uint64            // index of slots[head]
	sparse map[uint64][]byte // non-nil: the log is a map
	n      int               // events held
}

// indexed is an event with its index.
type indexed struct {
	index uint64
	data  []byte
}

// put stores data as the event at index, replacing any.
func (e *eventLog) put(index uint64, data []byte) {
	if e.sparse != nil {
		if _, ok := e.sparse[index]; !ok {
			e.n++
		}
		e.sparse[index] = data
		return
	}
	if e.n == 0 {
		e.reset()
		e.base = index
	}
	width := uint64(len(e.slots) - e.head)
	if index < e.base {
		e.toMap()
		e.put(index, data)
		return
	}
	switch off := index - e.base; {
	case off < width:
		slot := &e.slots[e.head+int(off)]
		if *slot == nil {
			e.n++
		}
		*slot = data
	case off-width <= maxGap:
		for range off - width {
			e.slots = append(e.slots, nil)
		}
		e.slots = append(e.slots, data)
		e.n++
	default:
		e.toMap()
		e.put(index, data)
	}
}

// deleteThrough removes the events with index <= through.
func (e *eventLog) deleteThrough(through uint64) {
	switch {
	case e.n == 0:
		return
	case e.sparse != nil:
		for i := range e.sparse {
			if i <= through {
				delete(e.sparse, i)
				e.n--
			}
		}
	case through >= e.base:
		// through-e.base+1 would wrap to 0 for through = MaxUint64 and base 0.
		k := int(min(through-e.base, uint64(len(e.slots)-e.head-1)) + 1)
		dropped := e.slots[e.head : e.head+k]
		for _, d := range dropped {
			if d != nil {
				e.n--
			}
		}
		clear(dropped)
		e.head += k
		e.base += uint64(k)
		if e.head > len(e.slots)/2 { // keep the dropped prefix small
			live := copy(e.slots, e.slots[e.head:])
			clear(e.slots[live:])
			e.slots, e.head = e.slots[:live], 0
		}
	}
	if e.n == 0 {
		e.reset()
	}
}

// reset empties the log and makes it a window again, keeping the slots'
// memory.
func (e *eventLog) reset() {
	clear(e.slots)
	e.slots, e.head, e.base, e.sparse, e.n = e.slots[:0], 0, 0, nil, 0
}

// toMap turns the window into a map.
func (e *eventLog) toMap() {
	m := make(map[uint64][]byte, e.n+1)
	for i, d := range e.slots[e.head:] {
		if d != nil {
			m[e.base+uint64(i)] = d
		}
	}
	n := e.n
	e.reset()
	e.slots = nil
	e.sparse, e.n = m, n
}

// copies returns checked copies of name's events with from <= index < to
// (to == 0: no bound) in ascending index order, or the error for the first
// damaged one (see [open]).
func (e *eventLog) copies(name string, from, to uint64) ([]indexed, error) {
	var out []indexed
	inRange := func(i uint64) bool { return i >= from && (to == 0 || i < to) }
	if e.sparse != nil {
		for i, d := range e.sparse {
			if inRange(i) {
				out = append(out, indexed{i, d})
			}
		}
		slices.SortFunc(out, func(a, b indexed) int { return cmp.Compare(a.index, b.index) })
	} else {
		// Only the slots in range: a read costs the events it returns,
		// not the window's width.
		width := uint64(len(e.slots) - e.head)
		lo, hi := uint64(0), width
		if from > e.base {
			lo = min(from-e.base, width)
		}
		if to != 0 {
			hi = min(max(to, e.base)-e.base, width)
		}
		for k := lo; k < hi; k++ {
			if d := e.slots[e.head+int(k)]; d != nil {
				out = append(out, indexed{e.base + k, d})
			}
		}
	}
	if len(out) > summerAfter {
		if err := openMany(out, name); err != nil {
			return nil, err
		}
		return out, nil
	}
	for k, ev := range out {
		data, err := open(durability.RecordEvent, name, ev.index, ev.data, nil)
		if err != nil {
			return nil, err
		}
		out[k].data = data
	}
	return out, nil
}

// openMany replaces the stored forms of name's events by checked copies
// of their data (see [open]), checked with a Summer, which hashes an
// event's key with a table lookup and its data as it copies it; making
// one costs about as much as hashing a dozen keys. (Its own function:
// the Summer, on its stack, is cleared on every call.)
func openMany(events []indexed, name string) error {
	var sum durability.Summer
	sum.Reset(durability.RecordEvent, name)
	for k, ev := range events {
		data, err := open(durability.RecordEvent, name, ev.index, ev.data, &sum)
		if err != nil {
			return err
		}
		events[k].data = data
	}
	return nil
}

// stored returns the stored forms of the events (unchecked, not copied)
// in ascending index order.
func (e *eventLog) stored() []indexed {
	var out []indexed
	if e.sparse != nil {
		for i, d := range e.sparse {
			out = append(out, indexed{i, d})
		}
		slices.SortFunc(out, func(a, b indexed) int { return cmp.Compare(a.index, b.index) })
		return out
	}
	for k, d := range e.slots[e.head:] {
		if d != nil {
			out = append(out, indexed{e.base + uint64(k), d})
		}
	}
	return out
}
