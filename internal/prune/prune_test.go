package prune

import (
	"maps"
	"slices"
	"testing"
)

func TestOldest_KeepsTheLatestIdleAndEveryBusy(t *testing.T) {
	// Keys 0..9, order = key; odd keys are busy.
	m := map[int]int{}
	for i := range 10 {
		m[i] = i
	}
	idle := func(k, _ int) bool { return k%2 == 0 }
	n := Oldest(m, 2, idle, func(v int) int { return v })
	if n != 3 {
		t.Errorf("deleted %d, want 3 (idle 0, 2, 4)", n)
	}
	got := slices.Sorted(maps.Keys(m))
	want := []int{1, 3, 5, 6, 7, 8, 9}
	if !slices.Equal(got, want) {
		t.Errorf("kept %v, want %v", got, want)
	}
}

func TestOldest_NothingPastTheBound(t *testing.T) {
	m := map[string]int{"a": 1, "b": 2}
	if n := Oldest(m, 2, func(string, int) bool { return true }, func(v int) int { return v }); n != 0 || len(m) != 2 {
		t.Errorf("deleted %d, left %d; want 0 and 2", n, len(m))
	}
}
