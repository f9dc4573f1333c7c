package actors

import (
	"maps"
	"slices"
)

// muteMax is how many calls a Resume answered a shell keeps muted at
// most, of each kind (see shell.muted, shell.mutedCalls). A Logic that
// never ends such a call (one that failed it before the Logic took it
// in, of which it knows nothing) leaves it muted; past muteMax, the
// oldest is forgotten: what the Logic still emits of it goes out, a
// second answer, as the late frames of a call whose record was forgotten
// reach the Logic (see closedCalls).
const muteMax = closedMax

// mutes is a set of muted calls by key K, each with a V, the oldest
// forgotten past muteMax. The zero value is empty.
type mutes[K comparable, V any] struct {
	m     map[K]muteEntry[V]
	order []muteKey[K] // the keys added, oldest first, with stale ones
	next  uint64       // the number of the latest added
}

type muteEntry[V any] struct {
	n uint64 // the number it was added under
	v V
}

type muteKey[K comparable] struct {
	k K
	n uint64
}

func (s *mutes[K, V]) len() int { return len(s.m) }

func (s *mutes[K, V]) get(k K) (V, bool) {
	e, ok := s.m[k]
	return e.v, ok
}

// add mutes k, with v, forgetting the oldest past muteMax.
func (s *mutes[K, V]) add(k K, v V) {
	if s.m == nil {
		s.m = make(map[K]muteEntry[V])
	}
	s.next++
	s.m[k] = muteEntry[V]{n: s.next, v: v}
	s.order = append(s.order, muteKey[K]{k: k, n: s.next})
	for len(s.m) > muteMax {
		e := s.order[0]
		s.order = s.order[1:]
		if s.m[e.k].n == e.n {
			delete(s.m, e.k)
		}
	}
	if len(s.order) > 2*muteMax {
		// Mostly stale: keep the live entries alone.
		s.order = slices.DeleteFunc(s.order, func(e muteKey[K]) bool { return s.m[e.k].n != e.n })
	}
}

func (s *mutes[K, V]) remove(k K) {
	delete(s.m, k)
	s.emptied()
}

// removeFunc removes the keys for which del reports true.
func (s *mutes[K, V]) removeFunc(del func(K) bool) {
	maps.DeleteFunc(s.m, func(k K, _ muteEntry[V]) bool { return del(k) })
	s.emptied()
}

func (s *mutes[K, V]) emptied() {
	if len(s.m) == 0 {
		s.order = s.order[:0]
	}
}
