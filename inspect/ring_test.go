package inspect

import (
	"slices"
	"strconv"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
)

// The ring keeps its keys first in first out across wrapping and growth.
func TestRing_FirstInFirstOut(t *testing.T) {
	var r ring[string]
	next, want := 0, []string{}
	push := func(k int) {
		for range k {
			id := strconv.Itoa(next)
			next++
			r.push(id)
			want = append(want, id)
		}
	}
	pop := func(k int) {
		for range k {
			if got := r.pop(); got != want[0] {
				t.Fatalf("pop %q, want %q", got, want[0])
			}
			want = want[1:]
		}
	}
	push(5)
	pop(3)
	push(7) // wraps in the first ring of 8
	push(6) // grows while wrapped
	pop(10)
	push(20)
	pop(len(want))
	if r.len() != 0 {
		t.Fatalf("len %d after popping all", r.len())
	}
}

// Past MaxSessions the newest sessions are kept, in order, however long
// it runs; a session forgotten and seen again starts clean.
func TestSessions_RingKeepsTheNewest(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	const limit = 3
	in, err := New(rt, &Options{MaxSessions: limit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	o := &modelObserver{in: in}
	ids := func() []string {
		var got []string
		for _, s := range in.Snapshot("").Sessions {
			got = append(got, s.ID)
		}
		return got
	}
	for i := range 4 * limit {
		run := newHookRun(t, "s"+strconv.Itoa(i))
		run.play(in, o)
		var want []string
		for j := max(0, i-limit+1); j <= i; j++ {
			want = append(want, "s"+strconv.Itoa(j))
		}
		slices.Sort(want) // the page lists them by id
		if got := ids(); !slices.Equal(got, want) {
			t.Fatalf("after s%d: sessions %v, want %v", i, got, want)
		}
	}
	// s0 was forgotten: seen again, it starts with no requests of before.
	again := newHookRun(t, "s0")
	for _, f := range again.params[0] {
		o.request(f)
	}
	for _, f := range again.ends[0] {
		o.request(f)
	}
	o.flush()
	d := in.Snapshot("s0").Session
	if d == nil || d.Requests != 1 || d.Answer != "" || len(d.Pending) != 0 || len(d.Streams) != 1 {
		t.Fatalf("s0 seen again: %+v, want one request, its stream open, nothing else", d)
	}
	if got := ids(); len(got) != limit || !slices.Contains(got, "s0") || slices.Contains(got, "s9") {
		t.Fatalf("sessions %v, want s0 in place of the oldest (s9)", got)
	}
}

// A popped slot of the ring no longer holds what was popped.
func TestRing_PopLetsGo(t *testing.T) {
	var r ring[*session]
	a, b := &session{id: "a"}, &session{id: "b"}
	r.push(a)
	r.push(b)
	if r.pop() != a {
		t.Fatal("pop: want a")
	}
	for i, x := range r.items {
		if x == a {
			t.Fatalf("items[%d] still holds the popped session", i)
		}
	}
}
