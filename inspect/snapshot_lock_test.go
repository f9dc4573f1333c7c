package inspect

import (
	"strconv"
	"testing"
)

// A snapshot's view is built (the session list sorted, the tree walked,
// the conversation decoded, the percentiles sorted) without the
// inspector's lock: the hooks on the hot path take it at every turn of
// the model adapter and at every tool result, and an event stream builds
// a view four times a second. Only copying what the view needs holds it.
func TestSnapshot_ViewBuiltWithoutTheLock(t *testing.T) {
	in, o := newObserved(t)
	for i := range 3 {
		run := newHookRun(t, "run-"+strconv.Itoa(i))
		run.play(in, o)
	}
	building, free := 0, 0
	in.building = func() {
		building++
		if in.mu.TryLock() {
			free++
			in.mu.Unlock()
		}
	}
	snap := in.Snapshot("run-1")
	if building != 1 || free != 1 {
		t.Fatalf("the view was built %d times, %d of them without the lock held; want once, without it", building, free)
	}
	// The view is the state the copy was made of.
	if len(snap.Sessions) != 3 || snap.Session == nil || snap.Session.ID != "run-1" || len(snap.Session.Conversation) != 1 ||
		snap.Session.Answer != "done" {
		t.Fatalf("sessions %+v, detail %+v: want 3 sessions, run-1's answered with its conversation", snap.Sessions, snap.Session)
	}
	for _, name := range costToolNames {
		var found bool
		for _, tf := range snap.Tools {
			if tf.Name == name {
				found = tf.Calls == 3 && tf.Timed > 0 && tf.P50 != ""
			}
		}
		if !found {
			t.Fatalf("tools %+v: want %s with 3 calls, some timed", snap.Tools, name)
		}
	}
}
