package inspect

import (
	"bytes"
	"testing"
	"unsafe"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/tools"
)

// newObserved is an inspector and the observer of one adapter, fed by
// hand as the adapter's actor would feed it.
func newObserved(t testing.TB) (*Inspector, *modelObserver) {
	t.Helper()
	_, in := newTestInspector(t)
	return in, &modelObserver{in: in}
}

// requestTurn is the adapter's turn that receives a request's END on
// stream, with what it emits in the same turn.
func requestTurn(o *modelObserver, stream string, emitted ...*messages.Frame) {
	o.request(messages.RawParam(stream, models.ParamMessages,
		models.EncodeMessages([]models.Message{models.UserMessage("go")})))
	o.flush()
	o.request(messages.End(stream))
	for _, f := range emitted {
		o.response(f)
	}
	o.flush()
}

// A call whose arguments stream in chunks shows them as they come, and
// the complete call replaces them; a result ends the call.
func TestPending_StreamedArgumentsShownSoFar(t *testing.T) {
	in, o := newObserved(t)
	requestTurn(o, "s1", messages.StreamingToolCall("s1", "c1", "echo"),
		messages.ToolArgChunk("s1", "c1", `{"x":`), messages.ToolArgChunk("s1", "c1", `4`))
	pending := func() []PendingCall {
		d := in.Snapshot("s1").Session
		if d == nil {
			t.Fatal("session s1 not shown")
		}
		return d.Pending
	}
	if p := pending(); len(p) != 1 || p[0].ID != "c1" || p[0].Name != "echo" || p[0].Stream != "s1" || p[0].Args != `{"x":4` {
		t.Fatalf("pending %+v, want c1 (echo on s1) with the arguments so far", p)
	}
	if d := in.Snapshot("s1").Session; len(d.Streams) != 1 {
		t.Fatalf("streams %+v, want s1 open (its response has not ended)", d.Streams)
	}
	call := messages.ToolCall("s1", "c1", "echo", []byte(`{"x":42}`))
	o.response(call)
	o.response(messages.End("s1"))
	if p := pending(); len(p) != 1 || p[0].Args != `{"x":42}` || !p[0].Running {
		t.Fatalf("pending %+v, want c1 complete and running", p)
	}
	result, err := messages.ToolResult("s1", "c1", "echo", map[string]int{"x": 42})
	if err != nil {
		t.Fatal(err)
	}
	in.OnToolResult(toolResult("s1", call, result))
	if p := pending(); len(p) != 0 {
		t.Fatalf("pending %+v after the result, want none", p)
	}
	if st := in.Snapshot("").Tools; len(st) != 1 || st[0].Calls != 1 {
		t.Fatalf("tools %+v, want echo with one call", st)
	}
}

// A response that ends in the turn of its request leaves no stream open,
// and its stream is never recorded (a fresh session's list of streams
// is not even made); one that fails before its END in that turn is left
// open neither, with its error shown; one that does not end is shown
// open until its END, and a second call removed before the first keeps
// the first pending.
func TestStreams_AnsweredInTheSameTurnNotLeftOpen(t *testing.T) {
	in, o := newObserved(t)
	requestTurn(o, "a", messages.Text("a", "hi"), messages.End("a"))
	requestTurn(o, "e", messages.Text("e", "half"), messages.Error("e", "model down"), messages.End("e"))
	requestTurn(o, "b", messages.Text("b", "thinking"))
	streams := func(id string) int { return len(in.Snapshot(id).Session.Streams) }
	if n := streams("a"); n != 0 {
		t.Fatalf("a: %d streams open, want none (answered in its turn)", n)
	}
	in.lock()
	made := cap(in.lookup("a").streams)
	in.mu.Unlock()
	if made != 0 {
		t.Fatalf("a: a list of %d streams made, want none (its stream never recorded)", made)
	}
	if n := streams("e"); n != 0 {
		t.Fatalf("e: %d streams open, want none (failed and ended in its turn)", n)
	}
	if d := in.Snapshot("e").Session; d.LastError != "model down" || d.Errors != 1 {
		t.Fatalf("e: last error %q, %d errors, want the model's", d.LastError, d.Errors)
	}
	if n := streams("b"); n != 1 {
		t.Fatalf("b: %d streams open, want 1", n)
	}
	c1 := messages.ToolCall("b", "c1", "alpha", []byte(`{}`))
	c2 := messages.ToolCall("b", "c2", "beta", []byte(`{}`))
	o.response(c1)
	o.response(c2)
	o.response(messages.End("b"))
	if n := streams("b"); n != 0 {
		t.Fatalf("b: %d streams open after its END, want none", n)
	}
	result, err := messages.ToolResult("b", "c2", "beta", true)
	if err != nil {
		t.Fatal(err)
	}
	in.OnToolResult(toolResult("b", c2, result))
	d := in.Snapshot("b").Session
	if len(d.Pending) != 1 || d.Pending[0].ID != "c1" || d.Pending[0].Name != "alpha" {
		t.Fatalf("pending %+v, want c1 (alpha) alone", d.Pending)
	}
	if d.Answer != "" || d.Response != "thinking" {
		t.Fatalf("response %q answer %q, want the text so far and no answer", d.Response, d.Answer)
	}
}

// A failed call is no longer pending, and its tool counts the call, the
// failure and its kind, with an alert in the feed; a CANCEL written into
// the adapter is the session's last error. (The paths the hooks take
// seldom, kept apart from the common ones.)
func TestResults_FailureCountedAndCancelShown(t *testing.T) {
	in, o := newObserved(t)
	call := messages.ToolCall("f", "c1", "echo", []byte(`{}`))
	requestTurn(o, "f", call, messages.End("f"))
	failed := messages.ToolError("f", "c1", "echo", "no such file")
	failed.Meta.FailureKind = string(tools.FailureTimeout)
	in.OnToolResult(toolResult("f", call, failed))
	snap := in.Snapshot("f")
	if p := snap.Session.Pending; len(p) != 0 {
		t.Fatalf("pending %+v after the failed result, want none", p)
	}
	if st := snap.Tools; len(st) != 1 || st[0].Calls != 1 || st[0].Failures != 1 || st[0].Kinds[string(tools.FailureTimeout)] != 1 {
		t.Fatalf("tools %+v, want echo with one call failed by a timeout", st)
	}
	if len(snap.Feed) == 0 || !snap.Feed[0].Alert || snap.Feed[0].Text != "echo call c1 on f failed (timeout)" {
		t.Fatalf("feed %+v, want the failure first", snap.Feed)
	}
	requestTurn(o, "f")
	o.request(messages.Cancel("f", "c9"))
	o.flush()
	if d := in.Snapshot("f").Session; d.LastError != "CANCEL sent on f" {
		t.Fatalf("last error %q, want the CANCEL", d.LastError)
	}
}

func toolResult(stream string, call, result *messages.Frame) tools.ToolResultEvent {
	return tools.ToolResultEvent{StreamID: stream, Iteration: 1, Call: call, Result: result}
}

// A session id may itself contain '#': stream "job#7#2" belongs to
// session "job#7", stream "job#7" to session "job". The sessions the
// observer and OnToolResult remember are not taken for a stream whose
// id merely equals theirs.
func TestSessions_IDsWithHashNotMistakenForTheirStreams(t *testing.T) {
	in, o := newObserved(t)
	c1 := messages.ToolCall("job#7", "c1", "echo", []byte(`{}`))
	c3 := messages.ToolCall("job#7", "c3", "echo", []byte(`{}`))
	requestTurn(o, "job#7", c1, c3, messages.End("job#7"))
	c2 := messages.ToolCall("job#7#2", "c2", "echo", []byte(`{}`))
	// Attempt 2 makes session "job#7", which the observer remembers;
	// then attempt 1's stream, "job#7", still belongs to session "job".
	requestTurn(o, "job#7#2", c2, messages.End("job#7#2"))
	requestTurn(o, "job#7", messages.Text("job#7", "late"))

	pending := func(session string) []string {
		t.Helper()
		d := in.Snapshot(session).Session
		if d == nil {
			t.Fatalf("session %q not shown", session)
		}
		var ids []string
		for _, p := range d.Pending {
			ids = append(ids, p.ID)
		}
		return ids
	}
	in.lock()
	job, job7 := in.lookup("job"), in.lookup("job#7")
	in.mu.Unlock()
	if job == nil || job7 == nil {
		t.Fatalf("sessions job %v, job#7 %v, want both", job != nil, job7 != nil)
	}
	if job.requests != 2 || job7.requests != 1 {
		t.Fatalf("requests: job %d, job#7 %d, want 2 and 1", job.requests, job7.requests)
	}
	if d := in.Snapshot("job").Session; d.Response != "late" {
		t.Fatalf("job's response %q, want the one of its stream job#7", d.Response)
	}

	result := func(stream string, call *messages.Frame) {
		t.Helper()
		r, err := messages.ToolResult(stream, call.GetToolCallId(), "echo", true)
		if err != nil {
			t.Fatal(err)
		}
		in.OnToolResult(toolResult(stream, call, r))
	}
	// Requests cleared job's calls: make them again, then job#7 newest.
	requestTurn(o, "job#7", c1, c3, messages.End("job#7"))
	requestTurn(o, "job#7#2", c2, messages.End("job#7#2"))
	result("job#7", c1) // the newest session is job#7, not c1's
	if got := pending("job"); len(got) != 1 || got[0] != "c3" {
		t.Fatalf("job pending %v after c1's result, want c3", got)
	}
	result("job#7#2", c2) // the results' session is job#7 now
	result("job#7", c3)
	if got := pending("job"); len(got) != 0 {
		t.Fatalf("job pending %v after the results, want none", got)
	}
	if got := pending("job#7"); len(got) != 0 {
		t.Fatalf("job#7 pending %v after the results, want none", got)
	}
}

// A finished call's frame is not kept by its session past the next
// request: nothing in s.calls, to its capacity, holds it.
func TestPending_FinishedCallsFrameNotKept(t *testing.T) {
	in, o := newObserved(t)
	big := bytes.Repeat([]byte("x"), 1<<20)
	call := messages.ToolCall("s", "c1", "echo", big)
	requestTurn(o, "s", call, messages.End("s"))
	r, err := messages.ToolResult("s", "c1", "echo", true)
	if err != nil {
		t.Fatal(err)
	}
	in.OnToolResult(toolResult("s", call, r))
	requestTurn(o, "s", messages.Text("s", "done"), messages.End("s"))
	in.lock()
	defer in.mu.Unlock()
	s := in.lookup("s")
	for i, p := range s.calls[:cap(s.calls)] {
		if p.call != nil {
			t.Fatalf("calls[%d] (length %d) still holds call %s", i, len(s.calls), p.id())
		}
	}
}

// A result whose call is another frame than the adapter's (the loop
// assembled it, say) ends the pending call of the same id, and no other.
func TestResults_CallMatchedByIDNotOnlyByFrame(t *testing.T) {
	in, o := newObserved(t)
	c1 := messages.ToolCall("s", "c1", "echo", []byte(`{}`))
	c2 := messages.ToolCall("s", "c2", "echo", []byte(`{}`))
	requestTurn(o, "s", c1, c2, messages.End("s"))
	assembled := messages.ToolCall("s", "c2", "echo", []byte(`{}`))
	r, err := messages.ToolResult("s", "c2", "echo", true)
	if err != nil {
		t.Fatal(err)
	}
	in.OnToolResult(toolResult("s", assembled, r))
	if p := in.Snapshot("s").Session.Pending; len(p) != 1 || p[0].ID != "c1" {
		t.Fatalf("pending %+v, want c1 alone", p)
	}
}

// Two agents' sessions of one id, each with a call of the same id
// pending: a result ends the call of the agent whose frame it carries,
// whichever session the result before was of, and a result whose call
// is another frame ends the call of one of them only. When one of the
// sessions is forgotten, the other is alone again.
func TestResults_TwinSessionsByCallFrame(t *testing.T) {
	in, alice := newObserved(t)
	alice.agent = "alice"
	bob := &modelObserver{in: in, agent: "bob"}
	ca := messages.ToolCall("s", "c1", "echo", []byte(`{}`))
	cb := messages.ToolCall("s", "c1", "echo", []byte(`{}`))
	requestTurn(alice, "s", ca, messages.End("s"))
	requestTurn(bob, "s", cb, messages.End("s"))
	r, err := messages.ToolResult("s", "c1", "echo", true)
	if err != nil {
		t.Fatal(err)
	}
	pending := func(key string) int { return len(in.Snapshot(key).Session.Pending) }
	in.OnToolResult(toolResult("s", cb, r))
	if a, b := pending("alice/s"), pending("bob/s"); a != 1 || b != 0 {
		t.Fatalf("after bob's result: alice %d pending, bob %d; want 1 and 0", a, b)
	}
	in.OnToolResult(toolResult("s", messages.ToolCall("s", "c1", "echo", []byte(`{}`)), r))
	if a, b := pending("alice/s"), pending("bob/s"); a != 0 || b != 0 {
		t.Fatalf("after a result of c1 of another frame: alice %d pending, bob %d; want none", a, b)
	}
	in.lock()
	a, b := in.index.findAgent("s", "alice", in.index.hash("s")), in.index.findAgent("s", "bob", in.index.hash("s"))
	if !a.twin || !b.twin {
		in.mu.Unlock()
		t.Fatalf("twins not marked: alice %v, bob %v", a.twin, b.twin)
	}
	in.index.remove(a)
	in.index.untwin(a)
	alone := !b.twin
	in.mu.Unlock()
	if !alone {
		t.Fatal("bob's session still marked twin once alice's is forgotten")
	}
}

// A record of the hooks fits in a cache line: the hooks write one per
// turn of the adapter and per tool result, on the adapter's and the
// loop's workers in turn, and one more line a record is one more line
// taken from the other core.
func TestRecord_FitsACacheLine(t *testing.T) {
	if size := unsafe.Sizeof(record{}); size > 64 {
		t.Fatalf("a record is %d bytes, want at most 64", size)
	}
}

// The log's records each lie on a cache line of their own when the
// padded array the log is made from allows it: newLog takes that array
// when its records start on a line, and the plain one otherwise (where
// the pad would only move them off their lines). Which one a given
// runtime's allocator gives is its choice; what the code guarantees is
// the choice made right, whatever the array's address (here, padded
// arrays at each of the eight addresses a line holds), and a log made
// once, never grown or moved (the hooks fold it when full).
func TestRecord_LogOnCacheLines(t *testing.T) {
	// Elements 8 bytes a line apart: element i's records start 8*i
	// bytes further into a line than element 0's.
	type shifted struct {
		_   [16]byte
		log paddedLog
	}
	if unsafe.Sizeof(shifted{})%64 != 8 {
		t.Fatalf("a shifted padded log is %d bytes, want 8 past a multiple of 64", unsafe.Sizeof(shifted{}))
	}
	arrays := new([8]shifted)
	onLines := 0
	for i := range arrays {
		p := &arrays[i].log
		log, ok := logOf(p)
		aligned := lineAligned(unsafe.Pointer(&p.records[0]))
		switch {
		case ok != aligned:
			t.Fatalf("padded array %d: records %d bytes into a line, taken %v", i, uintptr(unsafe.Pointer(&p.records[0]))%64, ok)
		case ok && (unsafe.SliceData(log) != &p.records[0] || len(log) != 0 || cap(log) != foldAt):
			t.Fatalf("padded array %d on a line: log at %p, %d of %d records, want its records, empty, %d of them", i, unsafe.SliceData(log), len(log), cap(log), foldAt)
		case ok:
			onLines++
		}
	}
	if onLines != 1 {
		t.Fatalf("%d of 8 padded arrays a line's eight addresses apart were taken, want 1", onLines)
	}

	in, o := newObserved(t)
	logAt := func() (at *record, records int) {
		in.mu.Lock()
		defer in.mu.Unlock()
		return unsafe.SliceData(in.log), cap(in.log)
	}
	made, records := logAt()
	if records != foldAt {
		t.Fatalf("the log holds %d records, want %d", records, foldAt)
	}
	t.Logf("the log's records start %d bytes into a line", uintptr(unsafe.Pointer(made))%64)
	run := newHookRun(t, "s")
	for i := range 2 * foldAt { // past a fold or two
		run.play(in, o)
		if at, records := logAt(); at != made || records != foldAt {
			t.Fatalf("after %d runs, the log is %d records at %p, want the %d made at %p", i+1, records, at, foldAt, made)
		}
	}
}

// The hooks on the hot path bump the version the event streams follow
// once for the records a fold shows together, not once a record: the
// first record left after a fold bumps it (a stream that sent before
// it sends again), the others find it bumped already. A locked
// instruction less a hook: a run of the benchmarks' conversation leaves
// seven records.
func TestVersion_BumpedOnceAFold(t *testing.T) {
	in, o := newObserved(t)
	first, second := newHookRun(t, "v1"), newHookRun(t, "v2")
	in.Snapshot("") // the log folded
	v := in.version.Load()
	first.play(in, o)
	if got := in.version.Load(); got != v+1 {
		t.Fatalf("version moved by %d over a run's records, want 1", got-v)
	}
	if d := in.Snapshot("v1").Session; d == nil || d.Requests != 4 {
		t.Fatalf("session v1 %+v, want its four requests shown", d)
	}
	v = in.version.Load()
	second.play(in, o)
	if got := in.version.Load(); got != v+1 {
		t.Fatalf("version moved by %d over the next run's records after a fold, want 1", got-v)
	}
	if d := in.Snapshot("v2").Session; d == nil || d.Requests != 4 {
		t.Fatalf("session v2 %+v, want its four requests shown", d)
	}
}

// The fields every hook on the hot path writes or reads (the lock, the
// version, the log and the count of its folds) are the Inspector's
// first 64 bytes: each cache line the hooks share is one more taken
// from the other core at every hook.
func TestInspector_HotFieldsShareALine(t *testing.T) {
	var in Inspector
	end := unsafe.Offsetof(in.folds) + unsafe.Sizeof(in.folds)
	if at := unsafe.Offsetof(in.mu); at != 0 || end > 64 {
		t.Fatalf("the lock at byte %d and the hot fields up to byte %d, want them all in the first 64", at, end)
	}
}

// The hook that fills the log folds it without bumping the version: a
// stream that reads the version then, and sends, sees the next record
// bump it, whichever hook leaves it (a turn or a tool result).
func TestVersion_BumpedAfterTheHooksOwnFold(t *testing.T) {
	for _, next := range []string{"turn", "tool result"} {
		t.Run(next, func(t *testing.T) {
			in, o := newObserved(t)
			run := newHookRun(t, "v")
			folds := func() uint64 {
				in.mu.Lock()
				defer in.mu.Unlock()
				return in.folds
			}
			before := folds()
			for turn := 0; folds() == before; turn = (turn + 1) % len(run.results) {
				in.OnToolResult(run.results[turn]) // no reader: the log fills
			}
			v := in.version.Load() // a stream reads it, and sends what the hook folded
			if next == "turn" {
				requestTurn(o, "w", messages.Text("w", "hi"), messages.End("w"))
			} else {
				in.OnToolResult(run.results[0])
			}
			if got := in.version.Load(); got == v {
				t.Fatalf("the version stayed %d over a %s recorded after the hook's fold: a stream would not send it", v, next)
			}
		})
	}
}
