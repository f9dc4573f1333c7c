package actors

import (
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// openStreams must behave as the set it replaces, past its inline room
// too: streams added twice are one, removed ones are gone, and all lists
// each open stream once; each open stream knows whether its caller's
// END came since it was added (an END on a stream not open notes
// nothing).
func TestOpenStreams_BehavesAsASet(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var o openStreams
	want := map[string]bool{} // open stream: its caller's END came
	for i := range 5000 {
		id := "s" + strconv.Itoa(r.IntN(12))
		switch r.IntN(4) {
		case 0:
			o.remove(id)
			delete(want, id)
		case 1:
			o.endInput(id)
			if _, ok := want[id]; ok {
				want[id] = true
			}
		default:
			o.add(id)
			if _, ok := want[id]; !ok {
				want[id] = false
			}
		}
		if o.len() != len(want) {
			t.Fatalf("step %d: len %d, want %d", i, o.len(), len(want))
		}
		got := o.all()
		slices.Sort(got)
		if w := slices.Sorted(maps.Keys(want)); !slices.Equal(got, w) {
			t.Fatalf("step %d: open %v, want %v", i, got, w)
		}
		for n := range 12 {
			id := "s" + strconv.Itoa(n)
			if got := o.inputEnded(id); got != want[id] {
				t.Fatalf("step %d: inputEnded(%s) = %v, want %v", i, id, got, want[id])
			}
		}
	}
}

func TestIsChildID(t *testing.T) {
	for _, c := range []struct {
		id, parent string
		want       bool
	}{
		{"a/b", "a", true},
		{"a/b/c", "a/b", true},
		{"a/", "a", true},
		{"a", "a", false},
		{"ab/c", "a", false},
		{"b/a", "a", false},
		{"", "a", false},
	} {
		if got := isChildID(c.id, c.parent); got != c.want {
			t.Errorf("isChildID(%q, %q) = %v, want %v", c.id, c.parent, got, c.want)
		}
	}
}
