package inspect

import (
	"slices"
	"strconv"
	"testing"
	"unsafe"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
)

// What the hooks on the hot path record is shown by the fold, at the
// latest when a reader asks: a snapshot taken before the records were
// folded shows all of them.
func TestFold_SnapshotShowsWhatTheHooksRecorded(t *testing.T) {
	in, o := newObserved(t)
	run := newHookRun(t, "run-1")
	run.play(in, o)
	in.mu.Lock()
	recorded := len(in.log)
	in.mu.Unlock()
	if recorded == 0 {
		t.Fatal("nothing left for the fold: the run was folded as it was played")
	}
	snap := in.Snapshot("run-1")
	if d := snap.Session; d == nil || d.Requests != 4 || d.Answer != "done" || len(d.Pending) != 0 {
		t.Fatalf("session run-1 %+v, want 4 requests answered, no call pending", d)
	}
	for _, name := range costToolNames {
		i := slices.IndexFunc(snap.Tools, func(tf ToolFigures) bool { return tf.Name == name })
		if i < 0 || snap.Tools[i].Calls != 1 || snap.Tools[i].Timed != 1 {
			t.Fatalf("%s: %+v, want 1 call, timed", name, snap.Tools)
		}
	}
}

// The records wait for the fold in bounded memory however many runs
// come with no reader: the hook that fills the log folds it, and the
// observer's buffer holds the frames of its records not folded yet
// and no more.
func TestFold_LogBounded(t *testing.T) {
	in, o := newObserved(t)
	for i := range 4 * DefaultMaxSessions {
		run := newHookRun(t, "run-"+strconv.Itoa(i))
		run.play(in, o)
		in.mu.Lock()
		records, frames := len(in.log), len(o.turn)
		in.mu.Unlock()
		if records >= foldAt || frames > 4*foldAt {
			t.Fatalf("after run %d: %d records of %d frames wait for the fold, want fewer than %d", i, records, frames, foldAt)
		}
	}
	if n := len(in.Snapshot("").Sessions); n != DefaultMaxSessions {
		t.Fatalf("%d sessions shown, want %d", n, DefaultMaxSessions)
	}
}

// The count of timed ENDs and calls that makes tool results read the
// clock comes back to zero once the results are shown: results of
// calls not timed do not read it for ever after.
func TestFold_TimedSettles(t *testing.T) {
	in, o := newObserved(t)
	for i := range 3 * foldAt {
		run := newHookRun(t, "run-"+strconv.Itoa(i))
		run.play(in, o)
	}
	in.lock()
	timed := in.timed
	in.mu.Unlock()
	if timed != 0 {
		t.Fatalf("timed %d once every result was shown, want 0", timed)
	}
}

// Messages staged for a request and recorded with a turn of another
// stream are shown when another stream's messages come before their
// request's END, as when they were still staged.
func TestFold_StagedMessagesOfAnotherStreamShown(t *testing.T) {
	in, o := newObserved(t)
	msgs := func(text string) *messages.Frame {
		return messages.RawParam("a", models.ParamMessages, models.EncodeMessages([]models.Message{models.UserMessage(text)}))
	}
	o.request(msgs("for a"))
	o.request(messages.Cancel("c", "")) // a turn of stream c: what is staged is recorded with it
	o.flush()
	b := messages.RawParam("b", models.ParamMessages, models.EncodeMessages([]models.Message{models.UserMessage("for b")}))
	o.request(b)
	o.request(messages.End("b"))
	o.response(messages.Text("b", "ok"))
	o.response(messages.End("b"))
	o.flush()
	d := in.Snapshot("a").Session
	if d == nil || len(d.Conversation) != 1 || d.Conversation[0].Text != "for a" {
		t.Fatalf("session a %+v, want its messages shown", d)
	}
}

// A turn's frames are handed over to the fold where the observer wrote
// them, not copied under the lock: the frames a record leaves for the
// fold are the observer's own, the same memory.
func TestFold_TurnHandedOverNotCopied(t *testing.T) {
	in, o := newObserved(t)
	in.Snapshot("") // the log folded
	requestTurn(o, "s", messages.Text("s", "hi"), messages.End("s"))
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.log) == 0 {
		t.Fatal("nothing left for the fold: the turn was folded as it was recorded")
	}
	frames := in.recorded(&in.log[len(in.log)-1])
	if len(frames) != 3 {
		t.Fatalf("the turn's record holds %d frames, want 3 (the END written in, the text, the END)", len(frames))
	}
	if &frames[0] != unsafe.SliceData(o.turn) {
		t.Fatalf("the turn's frames were copied for the fold (at %p), want the observer's own (at %p)", &frames[0], unsafe.SliceData(o.turn))
	}
}

// A turn recorded is read by the fold wherever the observer's buffer
// lies when it folds: the observer's next frames outgrow the buffer,
// under in.mu (the fold writes the buffer, dropping what it showed),
// and the fold reads the record in the grown buffer. The array left
// behind is not written again, by the fold or by the turns after it;
// the view shows every frame.
func TestFold_GrownBufferLeftAsRecorded(t *testing.T) {
	in, o := newObserved(t)
	in.Snapshot("") // the log folded
	o.request(messages.End("s"))
	o.response(messages.Text("s", "a"))
	o.Handled() // the turn recorded, the response not ended
	// The buffer filled, then grown.
	for i := 0; len(o.turn) < cap(o.turn); i++ {
		o.response(messages.Text("s", strconv.Itoa(i)))
	}
	recordedIn := o.turn[:cap(o.turn)]
	was := slices.Clone(recordedIn)
	o.response(messages.Text("s", "more")) // grows the buffer
	if unsafe.SliceData(o.turn) == unsafe.SliceData(recordedIn) {
		t.Fatal("the buffer did not move as it grew")
	}
	if d := in.Snapshot("s").Session; d == nil || d.Response != "a" {
		t.Fatalf("session s %+v, want the response so far, %q, read where it was recorded", d, "a")
	}
	o.Handled() // the turn after the fold: moved to the buffer's start
	o.response(messages.End("s"))
	requestTurn(o, "s", messages.Text("s", "b"), messages.End("s"))
	in.Snapshot("")
	for i := range recordedIn {
		if recordedIn[i] != was[i] {
			t.Fatalf("frame %d of the array the turn was recorded in changed from %+v to %+v after it grew", i, was[i], recordedIn[i])
		}
	}
	if d := in.Snapshot("s").Session; d == nil || d.Requests != 2 || d.Answer != "b" {
		t.Fatalf("session s %+v, want two requests, the second answered %q", d, "b")
	}
}

// An adapter idle after a fold keeps none of the frames folded
// reachable: the fold drops what it showed from the observer's buffer,
// which the adapter's next turn would otherwise have dropped (a log's
// worth of frames held for as long as the adapter stays idle).
func TestFold_IdleAdapterKeepsNoFoldedFrames(t *testing.T) {
	in, o := newObserved(t)
	in.Snapshot("") // the log folded
	// Turns of several frames each, no fold by a hook.
	for i := range foldAt / 4 {
		s := "s" + strconv.Itoa(i)
		requestTurn(o, s, messages.ToolCall(s, "c", "echo", []byte(`{}`)), messages.End(s))
	}
	in.mu.Lock()
	recorded := len(in.log)
	in.mu.Unlock()
	if recorded == 0 {
		t.Fatal("nothing left for the fold: the turns were folded as they were recorded")
	}
	if d := in.Snapshot("s0").Session; d == nil || d.Requests != 1 || len(d.Pending) != 1 {
		t.Fatalf("session s0 %+v, want its request and its call shown", d)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	for i, ob := range o.turn[:cap(o.turn)] {
		if ob.f != nil {
			t.Fatalf("frame %d of the idle adapter's buffer (%v on %s) still kept after the fold showed it", i, ob.f.GetType(), ob.f.GetStreamId())
		}
	}
}
