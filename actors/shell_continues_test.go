package actors

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/messages"
)

// continuesCopying is continues as it read a stream's state before it
// read it in place: through get, which gathers a copy of it.
func (o *openStreams) continuesCopying(id, call string) bool {
	st, ok := o.get(id)
	return ok && heldCall(call, st.call, st.multi, st.spent)
}

// TestOpenStreams_ContinuesAsGet: over random sequences of what a shell
// does to its open streams (streams opened and closed, calls noted with
// an id or none, argument chunks noted only when their stream holds
// their call, the Logic's END of a call or of the stream, the caller's
// END), on few streams kept inline and on many past the inline room and
// pruned, continues answers every stream and call as get-based code
// does. Along the way, endCall keeps its rule on ended calls: a frame's
// call the Logic ended (endedRest) is ended by no END of it, which
// leaves the stream as it was; and an END that leaves a stream open
// leaves it with a call still owed its answer (one known by its id, or
// one of no id), so that no stream stays open in the runtime's record
// with nothing for a restart or stop to answer.
func TestOpenStreams_ContinuesAsGet(t *testing.T) {
	for _, streams := range []int{3, 5, openQuiet + openQuiet/2} {
		t.Run(strconv.Itoa(streams), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(streams), 7))
			calls := []string{"", "c0", "c1", "c2", "c3", "c9"} // c9: no frame carries it
			var o openStreams
			check := func(step int, id string) {
				for _, c := range calls {
					if got, want := o.continues(id, c), o.continuesCopying(id, c); got != want {
						t.Fatalf("step %d: continues(%s, %q) = %v, get-based %v", step, id, c, got, want)
					}
				}
			}
			steps := 40000
			for i := range steps {
				id := "s" + strconv.Itoa(r.IntN(streams))
				call := calls[r.IntN(len(calls)-1)] // never c9 but in an END
				switch r.IntN(9) {
				case 0:
					o.remove(id)
				case 1, 2:
					o.add(id)
				case 3, 4:
					o.noteCall(id, call)
				case 5:
					// An argument chunk: noted only when it continues a
					// call its stream holds (see restOfEnded).
					if o.continues(id, call) {
						o.noteCall(id, call)
					}
				case 6:
					o.endInput(id)
				default:
					// The Logic's END, as shell.emit takes it; with an id
					// no frame carried now and then.
					if r.IntN(4) == 0 {
						call = "c9"
					}
					if call == "" {
						o.remove(id)
						break
					}
					before, open := o.get(id)
					before.multi, before.done = slices.Clone(before.multi), slices.Clone(before.done)
					rest := o.endedRest(id, call)
					if !o.endCall(id, call) {
						if rest {
							t.Fatalf("step %d: END of %s, a call stream %s does not hold of those the Logic ended, ended the stream", i, call, id)
						}
						o.remove(id)
						break
					}
					if !open {
						t.Fatalf("step %d: END of %s on stream %s, not open, reported it open", i, call, id)
					}
					after, _ := o.get(id)
					if rest && !reflect.DeepEqual(normal(before), normal(after)) {
						t.Fatalf("step %d: END of %s, a call the Logic ended, changed stream %s from %+v to %+v", i, call, id, before, after)
					}
					if known, anon := o.answers(id, nil); len(known) == 0 && !anon {
						t.Fatalf("step %d: END of %s left stream %s open with no call owed an answer: %+v", i, call, id, after)
					}
				}
				check(i, id)
				if i%64 == 0 || streams <= 5 {
					for n := range min(streams, 8) {
						check(i, "s"+strconv.Itoa(n))
					}
					check(i, "s"+strconv.Itoa(r.IntN(streams)))
				}
			}
		})
	}
}

// normal is st with its empty lists nil, to compare states.
func normal(st openState) openState {
	if len(st.multi) == 0 {
		st.multi = nil
	}
	if len(st.done) == 0 {
		st.done = nil
	}
	return st
}

// TestConn_EndOfACallNeverCarried: on a stream of which the Logic ended
// a call by its id, the Logic's END with an id no frame of the stream
// carried ends none of its calls still open. The caller still gets that
// END (a Conn's RecvStream returns at it), and the calls the stream
// holds, one of no id and one known by its id, each get one answer: the
// stop's.
func TestConn_EndOfACallNeverCarried(t *testing.T) {
	for _, c := range []struct {
		name   string
		frames []*messages.Frame
		want   []string
	}{
		{"text beside", []*messages.Frame{messages.Text("s", "hi"), messages.ToolCall("s", "c0", "tool", nil)},
			stoppedPair("")},
		{"call held beside", []*messages.Frame{messages.ToolCall("s", "h", "hold", nil), messages.ToolCall("s", "c0", "tool", nil)},
			append(stoppedPair("h"), stoppedPair("")...)},
	} {
		t.Run(c.name, func(t *testing.T) {
			frames := append(c.frames, messages.Text("s", "again zz"))
			want := append([]string{"END/c0[]", "END/zz[]"}, c.want...)
			if got := stopAnswers(t, frames...); !slices.Equal(got, want) {
				t.Errorf("stream s got %q,\nwant %q", got, want)
			}
		})
	}
}

// TestShell_StreamsLeftOpenByAnEndNeverCarriedBounded: a caller that
// never ends its streams, whose Logic ends each stream's calls by their
// ids and then sends an END with an id the stream never carried, leaves
// each stream open for its text beside the calls: quiet, a long-lived
// duplex keeps a bounded number of them.
func TestShell_StreamsLeftOpenByAnEndNeverCarriedBounded(t *testing.T) {
	s := &shell{logic: callAnswerer, subscriber: actor.NewPID("local", "sub"), ctx: &sentFrames{}}
	n := 4 * openQuiet
	for i := range n {
		q := "q" + strconv.Itoa(i)
		s.input(messages.Text(q, "thinking"))
		s.input(messages.ToolCall(q, "a", "tool", nil))
		s.Emit(endOf(q, "zz"))
		if !s.open.has(q) {
			t.Fatalf("stream %s, of a call of no id still open, closed by an END of a call it never carried", q)
		}
	}
	if kept := s.open.len(); kept > openQuiet+openQuiet/4 {
		t.Errorf("%d streams kept whose calls the Logic ended, want at most %d", kept, openQuiet+openQuiet/4)
	}
}
