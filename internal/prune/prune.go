// Package prune bounds the maps of long-lived actors that remember
// streams nobody ends: of the entries that may go, it keeps the latest.
package prune

import (
	"cmp"
	"slices"
)

// Oldest deletes from m, of the entries for which idle holds, all but
// the keep whose order is highest (the latest). Entries for which idle
// does not hold are never deleted. It returns how many it deleted.
func Oldest[K comparable, V any, O cmp.Ordered](m map[K]V, keep int, idle func(K, V) bool, order func(V) O) int {
	var drop []K
	for k, v := range m {
		if idle(k, v) {
			drop = append(drop, k)
		}
	}
	if len(drop) <= keep {
		return 0
	}
	slices.SortFunc(drop, func(a, b K) int { return cmp.Compare(order(m[a]), order(m[b])) })
	drop = drop[:len(drop)-keep]
	for _, k := range drop {
		delete(m, k)
	}
	return len(drop)
}
