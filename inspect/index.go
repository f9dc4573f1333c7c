package inspect

import (
	"hash/maphash"
	"unsafe"
)

// sessionIndex finds the sessions kept by id: a table of open addressing
// (linear probing), each slot holding a session and the hash of its id,
// at most half full. Unlike a Go map, forgetting a session neither
// hashes nor compares its id: the slot is found by the session's pointer
// from the hash it keeps (session.hash), and emptied by moving back the
// slots after it (no tombstones, so the table does not fill with them
// however many sessions come and go). It grows with the most sessions
// kept at once, never shrinks, and allocates nothing otherwise. Used
// under in.mu.
type sessionIndex struct {
	seed  maphash.Seed
	slots []indexSlot // a power of two long, or none
	n     int         // slots in use
}

type indexSlot struct {
	hash uint64
	s    *session // nil: the slot is empty
}

// hash is the hash of a session id.
func (x *sessionIndex) hash(id string) uint64 {
	if x.slots == nil {
		x.seed = maphash.MakeSeed()
		x.slots = make([]indexSlot, 16)
	}
	return maphash.String(x.seed, id)
}

// find returns the first session of id (of any agent) whose hash is h,
// or nil: most often the only one (see session.twin). Without one, free
// is the empty slot its look-up ended at, where addAt places a session
// of id if the index did not change in between.
func (x *sessionIndex) find(id string, h uint64) (s *session, free uint64) {
	mask := uint64(len(x.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		sl := &x.slots[i]
		if sl.s == nil {
			return nil, i
		}
		if sl.hash == h && sameString(sl.s.id, id) {
			return sl.s, 0
		}
	}
}

// findAgent returns the session id of agent, whose hash is h, or nil.
//
//go:noinline
func (x *sessionIndex) findAgent(id, agent string, h uint64) *session {
	var found *session
	x.twins(id, h, func(s *session) bool {
		if s.agent == agent {
			found = s
		}
		return found == nil
	})
	return found
}

// twins calls fn for each session of id (of any agent), whose hash is
// h, until fn returns false.
func (x *sessionIndex) twins(id string, h uint64, fn func(*session) bool) {
	if x.n == 0 {
		return
	}
	mask := uint64(len(x.slots) - 1)
	for i := h & mask; x.slots[i].s != nil; i = (i + 1) & mask {
		if sl := x.slots[i]; sl.hash == h && sl.s.id == id && !fn(sl.s) {
			return
		}
	}
}

// add indexes s under s.hash; no session of its id and agent may be
// indexed.
func (x *sessionIndex) add(s *session) {
	if 2*(x.n+1) > len(x.slots) {
		x.grow()
	}
	x.put(indexSlot{hash: s.hash, s: s})
	x.n++
}

// addAt is add for s, whose id find did not find, at free, the slot
// where its look-up ended (the index unchanged since): the look-up is
// not walked again.
func (x *sessionIndex) addAt(s *session, free uint64) {
	if 2*(x.n+1) > len(x.slots) {
		x.add(s)
		return
	}
	x.slots[free] = indexSlot{hash: s.hash, s: s}
	x.n++
}

// put writes sl in the first empty slot from its hash on.
func (x *sessionIndex) put(sl indexSlot) {
	mask := uint64(len(x.slots) - 1)
	i := sl.hash & mask
	for x.slots[i].s != nil {
		i = (i + 1) & mask
	}
	x.slots[i] = sl
}

// grow doubles the table.
//
//go:noinline
func (x *sessionIndex) grow() {
	old := x.slots
	x.slots = make([]indexSlot, max(16, 2*len(old)))
	for _, sl := range old {
		if sl.s != nil {
			x.put(sl)
		}
	}
}

// remove forgets s (found by its pointer from s.hash), if indexed. The
// slots after it whose hash does not place them after the emptied slot
// move back into it, one by one, so that every session stays reachable
// from its hash's slot without crossing an empty one.
func (x *sessionIndex) remove(s *session) {
	if x.n == 0 {
		return
	}
	mask := uint64(len(x.slots) - 1)
	i := s.hash & mask
	for x.slots[i].s != s {
		if x.slots[i].s == nil {
			return
		}
		i = (i + 1) & mask
	}
	for j := i; ; {
		j = (j + 1) & mask
		sl := x.slots[j]
		if sl.s == nil {
			break
		}
		// sl stays at j when its home is cyclically in (i, j].
		home := sl.hash & mask
		if i <= j && (home <= i || home > j) || i > j && home <= i && home > j {
			x.slots[i] = sl
			i = j
		}
	}
	x.slots[i] = indexSlot{}
	x.n--
}

// markTwins marks the sessions of s's id, s included, twins.
//
//go:noinline
func (x *sessionIndex) markTwins(s *session) {
	x.twins(s.id, s.hash, func(o *session) bool {
		o.twin = true
		return true
	})
}

// untwin unmarks s, removed (see Inspector.forget), and the session of
// its id left alone, if one is: a twin left alone is a twin no more.
//
//go:noinline
func (x *sessionIndex) untwin(s *session) {
	var last *session
	n := 0
	x.twins(s.id, s.hash, func(o *session) bool {
		last, n = o, n+1
		return n < 2
	})
	if n == 1 {
		last.twin = false
	}
	s.twin = false
}

// sameString is a == b, the pointers compared first: the stream ids and
// tool names the hooks compare are most often the same string (the one
// the request or the script carried), which then costs no call to
// compare bytes.
func sameString(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || a == b)
}
