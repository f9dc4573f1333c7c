package onemap

import (
	"slices"
	"testing"
)

// TestMap: keys added, found, removed and counted as a Go map would,
// whichever of them is the one kept out of the map, and a key removed
// from the map side leaves the one kept out alone.
func TestMap(t *testing.T) {
	var m Map[int]
	vals := make([]int, 4)
	for i := range vals {
		vals[i] = i
	}
	for i, k := range []string{"a", "b", "c"} {
		m.Add(k, &vals[i])
	}
	if m.Len() != 3 {
		t.Fatalf("Len %d, want 3", m.Len())
	}
	for i, k := range []string{"a", "b", "c"} {
		if v, ok := m.Get(k); !ok || *v != i {
			t.Errorf("Get(%q) = %v, %v; want %d", k, v, ok, i)
		}
	}
	if _, ok := m.Get("z"); ok {
		t.Error(`Get("z") found a value`)
	}
	m.Delete("b") // kept in the map
	if _, ok := m.Get("b"); ok || m.Len() != 2 {
		t.Errorf("after Delete(b): found %v, Len %d", ok, m.Len())
	}
	m.Delete("a") // the one kept out
	if _, ok := m.Get("a"); ok || m.Len() != 1 {
		t.Errorf("after Delete(a): found %v, Len %d", ok, m.Len())
	}
	m.Add("d", &vals[3]) // takes the free place out of the map
	var got []int
	for _, v := range m.Values() {
		got = append(got, *v)
	}
	slices.Sort(got)
	if !slices.Equal(got, []int{2, 3}) {
		t.Errorf("Values %v, want [2 3]", got)
	}
	m.Delete("z") // no such key: nothing changes
	if m.Len() != 2 {
		t.Errorf("Len %d after deleting a missing key, want 2", m.Len())
	}
}

// TestMap_OneStreamNoMap: one key at a time makes no Go map.
func TestMap_OneStreamNoMap(t *testing.T) {
	var m Map[int]
	v := 1
	if n := testing.AllocsPerRun(100, func() {
		m.Add("s", &v)
		if _, ok := m.Get("s"); !ok {
			t.Fatal("not found")
		}
		m.Delete("s")
	}); n != 0 {
		t.Errorf("%v allocations for one key at a time, want 0", n)
	}
	if m.rest != nil {
		t.Error("a map was made for one key at a time")
	}
}
