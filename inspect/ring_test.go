package inspect

import (
	"slices"
	"strconv"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/messages"
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

// newLimited is an inspector keeping limit sessions.
func newLimited(t *testing.T, limit int) *Inspector {
	t.Helper()
	in, err := New(actorstest.NewRuntime(t, nil), &Options{MaxSessions: limit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	return in
}

// A forgotten session is found by its id nowhere (the page, a cut, the
// results), however many sessions are made after it, while the index
// of the sessions keeps those kept alone, in a table that stops growing.
func TestSessions_ForgottenNotFoundByTheirIDs(t *testing.T) {
	const limit = 3
	in := newLimited(t, limit)
	o := &modelObserver{in: in}
	const made = 300
	for i := range made {
		run := newHookRun(t, "s"+strconv.Itoa(i))
		run.play(in, o)
		in.lock()
		indexed, slots := in.index.n, len(in.index.slots)
		in.mu.Unlock()
		if indexed > limit || slots > 16 {
			t.Fatalf("after s%d: %d sessions in an index of %d slots, want %d at most in 16", i, indexed, slots, limit)
		}
	}
	for i := range made {
		id := "s" + strconv.Itoa(i)
		kept := i >= made-limit
		in.lock()
		found := in.lookup(id) != nil
		in.mu.Unlock()
		if found != kept {
			t.Fatalf("%s found %v, want %v", id, found, kept)
		}
		if shown := in.Snapshot(id).Session != nil; shown != kept {
			t.Fatalf("%s detailed on the page %v, want %v", id, shown, kept)
		}
	}
	if _, err := in.CutStream("s0"); err == nil {
		t.Fatal("cut of a forgotten session's stream: no error")
	}
}

// The session an observer remembers for a stream is not taken once it
// was forgotten and its memory reused for another session: the stream
// seen again gets a session of its own, and the other one is left alone.
func TestSessions_RememberedSessionReusedNotWrittenInto(t *testing.T) {
	in := newLimited(t, 2)
	o, other := &modelObserver{in: in}, &modelObserver{in: in}
	requestTurn(o, "a", messages.Text("a", "first"), messages.End("a"))
	for _, id := range []string{"b", "c", "d"} { // c forgets a, d reuses its memory
		requestTurn(other, id, messages.Text(id, id+"'s"), messages.End(id))
	}
	requestTurn(o, "a", messages.Text("a", "again"), messages.End("a"))
	if d := in.Snapshot("a").Session; d == nil || d.Requests != 1 || d.Answer != "again" {
		t.Fatalf("a seen again: %+v, want one request answered again", d)
	}
	if d := in.Snapshot("d").Session; d == nil || d.Requests != 1 || d.Answer != "d's" {
		t.Fatalf("d: %+v, want its own request and answer only", d)
	}
}
