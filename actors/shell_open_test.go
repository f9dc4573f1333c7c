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

// openStreams keeps the calls of a stream that carries several, past its
// inline room too: a call noted with another id than the one noted is
// another call of the stream; an END of one of them (endCall) ends it
// alone, down to one call, the stream's sole call again, and is ended
// (endedCall) until a call is noted with its id again: a second END of
// it, or an END of a call the stream never carried while it holds one,
// leaves the stream open (endCall reports so). The lists it
// reuses are never shared between streams.
func TestOpenStreams_KeepsSeveralCalls(t *testing.T) {
	type model struct {
		noted string
		calls []string // when several
		done  []string // ended by endCall, not noted since
	}
	r := rand.New(rand.NewPCG(3, 4))
	var o openStreams
	want := map[string]*model{}
	for i := range 20000 {
		id := "s" + strconv.Itoa(r.IntN(5))
		call := "c" + strconv.Itoa(r.IntN(4))
		m := want[id]
		switch r.IntN(6) {
		case 0:
			o.remove(id)
			delete(want, id)
		case 1:
			o.add(id)
			if m == nil {
				want[id] = &model{}
			}
		case 2, 3:
			o.noteCall(id, call)
			if m != nil {
				m.done = slices.DeleteFunc(m.done, func(c string) bool { return c == call })
			}
			if m != nil && m.noted != call {
				if m.noted != "" {
					if len(m.calls) == 0 {
						m.calls = []string{m.noted}
					}
					if !slices.Contains(m.calls, call) {
						m.calls = append(m.calls, call)
					}
				}
				m.noted = call
			}
		default:
			ended := o.endCall(id, call)
			wantEnded := m != nil && slices.Contains(m.calls, call)
			// A second END of an ended call, kept or not, or an END of a
			// call never carried on a stream that holds a call, ends
			// nothing.
			if want := wantEnded || m != nil && m.noted != "" && call != m.noted; ended != want {
				t.Fatalf("step %d: endCall(%s, %s) = %v, want %v", i, id, call, ended, want)
			}
			if wantEnded {
				if !slices.Contains(m.done, call) {
					m.done = append(m.done, call)
				}
				m.calls = slices.DeleteFunc(m.calls, func(c string) bool { return c == call })
				if m.noted == call {
					m.noted = m.calls[len(m.calls)-1]
				}
				if len(m.calls) == 1 {
					m.calls = nil
				}
			}
		}
		for n := range 5 {
			id := "s" + strconv.Itoa(n)
			m := want[id]
			if m == nil {
				m = &model{}
			}
			sole := m.noted
			if len(m.calls) > 0 {
				sole = ""
			}
			if o.call(id) != m.noted || o.sole(id) != sole || !slices.Equal(o.callsOf(id), m.calls) {
				t.Fatalf("step %d: stream %s has call %q, sole %q, calls %q; want %q, %q, %q",
					i, id, o.call(id), o.sole(id), o.callsOf(id), m.noted, sole, m.calls)
			}
			for _, c := range []string{"c0", "c1", "c2", "c3"} {
				if got, want := o.shares(id, c), slices.Contains(m.calls, c); got != want {
					t.Fatalf("step %d: shares(%s, %s) = %v, want %v", i, id, c, got, want)
				}
				if got, want := o.endedCall(id, c), slices.Contains(m.done, c); got != want {
					t.Fatalf("step %d: endedCall(%s, %s) = %v, want %v", i, id, c, got, want)
				}
			}
		}
	}
}

// TestOpenStreams_SeveralCallsNoAllocation: a stream that carries
// several calls, one after another, costs no allocation once the first
// one has: the lists of its calls and of those ended are reused, also
// when an ended call is sent again and ended a second time.
func TestOpenStreams_SeveralCallsNoAllocation(t *testing.T) {
	var o openStreams
	cycle := func() {
		o.add("s")
		o.noteCall("s", "c1")
		o.noteCall("s", "c2")
		o.noteCall("s", "c3")
		o.endCall("s", "c1")
		o.noteCall("s", "c1")
		o.endCall("s", "c1")
		o.endCall("s", "c2")
		o.remove("s")
	}
	cycle()
	if n := testing.AllocsPerRun(100, cycle); n != 0 {
		t.Errorf("a stream of several calls cost %v allocations, want 0", n)
	}
}

// callsOf returns the calls kept of id (see noteCall): none unless it
// carries several.
func (o *openStreams) callsOf(id string) []string {
	for i, f := range o.few[:o.n] {
		if f == id {
			return o.multi[i]
		}
	}
	return o.more[id].multi
}
