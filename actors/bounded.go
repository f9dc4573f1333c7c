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

// bounded maps keys K to values V, closedMax at most: past them, the
// oldest added is forgotten. It holds the records of answered calls (see
// closedCalls) and the muted calls (see muteMax). The zero value is
// empty.
type bounded[K comparable, V any] struct {
	m     map[K]boundedEntry[V]
	order []boundedKey[K] // the keys added, oldest first, with stale ones
	next  uint64          // the number of the latest added
}

type boundedEntry[V any] struct {
	n uint64 // the number it was added under
	v V
}

type boundedKey[K comparable] struct {
	k K
	n uint64
}

func (s *bounded[K, V]) len() int { return len(s.m) }

func (s *bounded[K, V]) get(k K) (V, bool) {
	e, ok := s.m[k]
	return e.v, ok
}

// add maps k to v, forgetting the oldest past closedMax.
func (s *bounded[K, V]) add(k K, v V) {
	if s.m == nil {
		s.m = make(map[K]boundedEntry[V])
	}
	s.next++
	s.m[k] = boundedEntry[V]{n: s.next, v: v}
	s.order = append(s.order, boundedKey[K]{k: k, n: s.next})
	for len(s.m) > closedMax {
		e := s.order[0]
		s.order = s.order[1:]
		if s.m[e.k].n == e.n {
			delete(s.m, e.k)
		}
	}
	if len(s.order) > 2*closedMax {
		// Mostly stale: keep the live entries alone.
		s.order = slices.DeleteFunc(s.order, func(e boundedKey[K]) bool { return s.m[e.k].n != e.n })
	}
}

// each calls fn with each key and value, oldest first.
func (s *bounded[K, V]) each(fn func(K, V)) {
	for _, e := range s.order {
		if r, ok := s.m[e.k]; ok && r.n == e.n {
			fn(e.k, r.v)
		}
	}
}

func (s *bounded[K, V]) remove(k K) {
	delete(s.m, k)
	s.emptied()
}

// removeFunc removes the keys for which del reports true.
func (s *bounded[K, V]) removeFunc(del func(K) bool) {
	maps.DeleteFunc(s.m, func(k K, _ boundedEntry[V]) bool { return del(k) })
	s.emptied()
}

func (s *bounded[K, V]) emptied() {
	if len(s.m) == 0 {
		s.order = s.order[:0]
	}
}
