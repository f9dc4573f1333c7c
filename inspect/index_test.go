package inspect

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/polyweave/polyweave-go/agent"
)

// The index finds every session added and not removed, whatever their
// hashes: sessions whose hashes crowd a few slots (runs that wrap past
// the table's end included), added and removed in any order, checked
// against a map after every step. Removing leaves no tombstones: the
// slots in use are the sessions indexed. A session is added at the
// slot its look-up ended at as often as plainly.
func TestSessionIndex_FindsWhatWasAddedAndNotRemoved(t *testing.T) {
	for _, homes := range []uint64{1, 3, 16, 1 << 40} { // hashes drawn from so many values
		t.Run(strconv.FormatUint(homes, 10), func(t *testing.T) {
			var x sessionIndex
			x.hash("") // the table made
			rng := rand.New(rand.NewPCG(1, homes))
			want := map[string]*session{}
			var ids []string
			for step := range 3000 {
				if len(ids) == 0 || rng.IntN(3) > 0 && len(ids) < 40 {
					id := "s" + strconv.Itoa(step)
					s := &session{id: id, hash: 13 + rng.Uint64N(homes)} // 13: runs wrap in a table of 16
					if step%2 == 0 {
						x.add(s)
					} else if found, free := x.find(id, s.hash); found != nil {
						t.Fatalf("step %d: %s found before it was added", step, id)
					} else {
						x.addAt(s, free)
					}
					want[id], ids = s, append(ids, id)
				} else {
					i := rng.IntN(len(ids))
					x.remove(want[ids[i]])
					delete(want, ids[i])
					ids[i], ids = ids[len(ids)-1], ids[:len(ids)-1]
				}
				used := 0
				for _, sl := range x.slots {
					if sl.s != nil {
						used++
					}
				}
				if used != len(want) || x.n != len(want) {
					t.Fatalf("step %d: %d slots used, n %d, want %d", step, used, x.n, len(want))
				}
				for id, s := range want {
					if got, _ := x.find(id, s.hash); got != s {
						t.Fatalf("step %d: %s not found (got %v)", step, id, got)
					}
				}
			}
			if len(x.slots) > 128 {
				t.Fatalf("%d slots for 40 sessions at most", len(x.slots))
			}
			for id, s := range want {
				x.remove(s)
				x.remove(s) // not indexed any more: nothing happens
				if got, _ := x.find(id, s.hash); got != nil {
					t.Fatalf("%s found after its removal", id)
				}
			}
			if x.n != 0 {
				t.Fatalf("n %d after every session was removed", x.n)
			}
		})
	}
}

// Through the inspector: a session is found by its id while kept, its
// memory reused for a new one once forgotten (the old id not found, the
// new one found), and the index does not grow as sessions come and go
// past the bound.
func TestSessionIndex_SessionsFoundForgottenReused(t *testing.T) {
	in := newLimited(t, 4)
	o := &modelObserver{in: in}
	ids := func(i int) string { return "run-" + strconv.Itoa(i) }
	var slots int
	for i := range 1000 {
		run := newHookRun(t, ids(i))
		run.play(in, o)
		in.lock()
		s := in.lookup(ids(i))
		if s == nil || s.requests != 4 {
			in.mu.Unlock()
			t.Fatalf("%s not found after its run (%v)", ids(i), s)
		}
		if i >= 4 && in.lookup(ids(i-4)) != nil {
			in.mu.Unlock()
			t.Fatalf("%s found past the bound of 4", ids(i-4))
		}
		if i == 10 {
			slots = len(in.index.slots)
		}
		if i > 10 && len(in.index.slots) != slots {
			in.mu.Unlock()
			t.Fatalf("index grew from %d to %d slots after %d sessions, 4 kept", slots, len(in.index.slots), i+1)
		}
		in.mu.Unlock()
	}
	in.lock()
	spare := in.spare
	in.mu.Unlock()
	requestTurn(o, "new")
	in.lock()
	defer in.mu.Unlock()
	if s := in.lookup("new"); s == nil || s != spare {
		t.Fatalf("session new is %p, want the forgotten session's memory %p reused", s, spare)
	}
}

// sessionKey reads a stream's session as agent.SessionOf does, its
// shortcut for ids without '#' or '%' included.
func TestSessionKey_AsAgentReadsIt(t *testing.T) {
	for _, stream := range []string{"", "run-1", "a!b", "it's", "job#2", "job#7#2", "job#x", "a%23b#3", "50%25", "#", "x#0", "s!#2"} {
		want, _ := agent.SessionOf(stream)
		if got := sessionKey(stream); got != want {
			t.Errorf("sessionKey(%q) = %q, want %q", stream, got, want)
		}
	}
}
