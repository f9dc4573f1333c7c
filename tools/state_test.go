package tools_test

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

func TestBreaker(t *testing.T) {
	b := tools.Breaker{Threshold: 2}
	if !b.Allow() || b.Failure() {
		t.Fatal("one failure opened the breaker")
	}
	b.Expire() // the first failure ages out
	if b.Failure() {
		t.Fatal("opened with one failure in the window")
	}
	if !b.Failure() || b.State() != tools.BreakerOpen || b.Allow() {
		t.Fatalf("two failures in the window: state %v", b.State())
	}
	b.Cooled()
	if b.State() != tools.BreakerHalfOpen || !b.Allow() || b.Allow() {
		t.Fatal("half-open must admit exactly one trial call")
	}
	if !b.Failure() || b.State() != tools.BreakerOpen {
		t.Fatal("a failed trial must reopen the breaker")
	}
	b.Cooled()
	b.Allow()
	b.Neutral() // the trial was an invalid call: another trial may run
	if !b.Allow() {
		t.Fatal("neutral outcome did not free the trial slot")
	}
	b.Success()
	if b.State() != tools.BreakerClosed || !b.Allow() || b.Failure() {
		t.Fatal("a successful trial must close the breaker and reset the count")
	}
}

func started(stream, id, name string, index uint32) tools.Event {
	return tools.Event{Kind: tools.EventCallStarted, StreamID: stream, ToolCallID: id, Name: name, Index: index}
}

func chunk(p *tools.PendingCalls, stream, id, text string) bool {
	seq, ok := p.SeqOf(stream, id)
	if ok {
		p.Apply(tools.Event{Kind: tools.EventChunkAppended, Seq: seq, Chunk: text})
	}
	return ok
}

func TestPendingCalls_SnapshotRestore(t *testing.T) {
	var p tools.PendingCalls
	p.Apply(started("s", "a", "read", 0))
	p.Apply(started("s", "b", "write", 1))
	p.Apply(started("s", "a", "other", 0)) // already pending: no change
	if p.Len() != 2 || p.Snapshot()[0].Name != "read" {
		t.Fatalf("started: %+v", p.Snapshot())
	}
	chunk(&p, "s", "b", `{"pa`)
	chunk(&p, "s", "a", `{"x":`)
	p.Apply(tools.Event{Kind: tools.EventChunkAppended, Seq: 99, Chunk: "lost"})
	var q tools.PendingCalls
	q.Apply(tools.Event{Kind: tools.EventRestored, State: p.State()})
	chunk(&p, "s", "a", "1}") // the restored state is a copy
	chunk(&q, "s", "a", "2}")
	if a := q.Snapshot()[0]; string(a.Args) != `{"x":2}` || a.Name != "read" {
		t.Fatalf("restored call %+v", a)
	}
	q.Apply(tools.Event{Kind: tools.EventCallCompleted, StreamID: "s", ToolCallID: "a"})
	q.Apply(started("s", "c", "x", 2))
	if got := q.Snapshot(); len(got) != 2 || got[0].ToolCallID != "b" || got[1].ToolCallID != "c" || got[1].Seq != 3 {
		t.Fatalf("after complete and start: %+v", got)
	}
	q.Apply(tools.Event{Kind: tools.EventStreamEnded, StreamID: "s"})
	if q.Len() != 0 || q.InStream("s") != 0 {
		t.Fatalf("stream ended, left %+v", q.Snapshot())
	}
}

// TestAssembler_InterleavedCalls feeds two streaming calls whose chunks
// interleave (index 1 starts before index 0 is done), an atomic call,
// and a call that never completes.
func TestAssembler_InterleavedCalls(t *testing.T) {
	in := []*messages.Frame{
		messages.Text("s", "Let me look."),
		messages.StreamingToolCall("s", "c0", "read_file"),
		messages.ToolArgChunk("s", "c0", `{"pa`),
		messages.StreamingToolCall("s", "c1", "read_file"),
		messages.ToolArgChunk("s", "c1", `{"path":"b`),
		messages.ToolArgChunk("s", "c0", `th":"a\u00`),
		messages.ToolArgChunk("s", "c1", `.txt"}`),
		messages.ToolComplete("s", "c1"),
		messages.ToolArgChunk("s", "c0", `e9.txt"}`),
		messages.ToolComplete("s", "c0"),
		messages.ToolCall("s", "c2", "now", json.RawMessage(``)),
		messages.StreamingToolCall("s", "c3", "write_file"),
		messages.ToolArgChunk("s", "c3", `{"path":"x","content":"unterminated`),
		messages.ToolComplete("s", "ghost"),
		messages.End("s"),
	}
	var a tools.Assembler
	var got []string
	for _, f := range in {
		for _, d := range a.Step(f) {
			got = append(got, []string{"pass", "run", "reject"}[d.Kind]+" "+line(d.Frame)+" "+d.Message)
		}
	}
	want := []string{
		`pass TEXT stream=s text="Let me look." `,
		`run TOOL_CALL stream=s id=c1 name=read_file payload={"path":"b.txt"} `,
		`run TOOL_CALL stream=s id=c0 name=read_file payload={"path":"a\u00e9.txt"} `,
		`run TOOL_CALL stream=s id=c2 name=now `,
		`reject TOOL_CALL stream=s id=c3 name=write_file payload={"path":"x","content":"unterminated invalid arguments for tool "write_file": the stream ended before the arguments were complete`,
		`pass END stream=s `,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if a.Pending.Len() != 0 {
		t.Fatal("pending calls left after END")
	}
}

// TestPendingCalls_ChunksBySeqAndByFrame mixes the two ways a chunk finds
// its call: by the frame's stream and call id (live, through Decide) and
// by Seq alone (an event replayed from a store), before and after calls
// complete, and with a call id used again by the next response of the
// stream: each chunk lands in the call it names, a chunk for a call no
// longer pending changes nothing.
func TestPendingCalls_ChunksBySeqAndByFrame(t *testing.T) {
	var a tools.Assembler
	p := &a.Pending
	a.Step(messages.StreamingToolCall("s", "c", "read"))
	a.Step(messages.ToolArgChunk("s", "c", `{"a"`))
	first, _ := p.SeqOf("s", "c")
	p.Apply(tools.Event{Kind: tools.EventChunkAppended, Seq: first, Chunk: `:1`}) // by Seq: the index is made now
	a.Step(messages.StreamingToolCall("t", "c", "read"))                          // same id, other stream
	a.Step(messages.ToolArgChunk("s", "c", `}`))
	a.Step(messages.ToolArgChunk("t", "c", `{"b":2}`))
	second, _ := p.SeqOf("t", "c")
	if got := p.Snapshot(); len(got) != 2 || string(got[0].Args) != `{"a":1}` || string(got[1].Args) != `{"b":2}` {
		t.Fatalf("two calls: %+v", got)
	}
	ds := a.Step(messages.ToolComplete("s", "c"))
	if len(ds) != 1 || ds[0].Kind != tools.Run || string(ds[0].Frame.GetPayload()) != `{"a":1}` {
		t.Fatalf("completion: %+v", ds)
	}
	p.Apply(tools.Event{Kind: tools.EventChunkAppended, Seq: first, Chunk: `lost`}) // completed: nothing
	a.Step(messages.ToolArgChunk("s", "c", `lost`))
	a.Step(messages.StreamingToolCall("s", "c", "write")) // the id again, in the next response
	third, _ := p.SeqOf("s", "c")
	p.Apply(tools.Event{Kind: tools.EventChunkAppended, Seq: third, Chunk: `{"c"`})
	a.Step(messages.ToolArgChunk("s", "c", `:3}`))
	p.Apply(tools.Event{Kind: tools.EventChunkAppended, Seq: second, Chunk: ``})
	got := p.Snapshot()
	if len(got) != 2 || got[0].Seq != second || string(got[0].Args) != `{"b":2}` ||
		got[1].Seq != third || got[1].Name != "write" || string(got[1].Args) != `{"c":3}` {
		t.Fatalf("after the completion: %+v", got)
	}
	a.Step(messages.End("s"))
	if p.Len() != 1 || p.InStream("s") != 0 || p.InStream("t") != 1 || p.Has("s", "c") {
		t.Fatalf("stream s ended: %+v", p.Snapshot())
	}
	p.Apply(tools.Event{Kind: tools.EventChunkAppended, Seq: third, Chunk: `lost`})
	a.Step(messages.ToolArgChunk("s", "c", `lost`))
	if ds := a.Step(messages.ToolComplete("t", "c")); len(ds) != 1 || string(ds[0].Frame.GetPayload()) != `{"b":2}` || p.Len() != 0 {
		t.Fatalf("last completion: %+v, left %+v", ds, p.Snapshot())
	}
}

// TestPendingCalls_ClosedTimes: a stream with pending calls, once
// closed, keeps the time it was closed first until it is opened again or
// has no pending call left; a stream without pending calls is not
// closed; a state keeps the times (a router snapshot, loaded at the next
// recovery). A state stored before it had them loads with none: its
// calls wait from the recovery that loads it.
func TestPendingCalls_ClosedTimes(t *testing.T) {
	closedAt := func(p *tools.PendingCalls) map[string]int64 {
		out := map[string]int64{}
		for _, cs := range p.State().GetClosed() {
			out[cs.GetStreamId()] = cs.GetClosedAt()
		}
		return out
	}
	var p tools.PendingCalls
	p.Apply(tools.Event{Kind: tools.EventCallStarted, StreamID: "s", ToolCallID: "a", Name: "t"})
	p.Apply(tools.Event{Kind: tools.EventCallStarted, StreamID: "o", ToolCallID: "c", Name: "t"})
	p.Apply(tools.Event{Kind: tools.EventCallStarted, StreamID: "e", ToolCallID: "d", Name: "t"})
	p.Apply(tools.Event{Kind: tools.EventStreamClosed, StreamID: "s", ClosedAt: 100})
	p.Apply(tools.Event{Kind: tools.EventStreamClosed, StreamID: "e", ClosedAt: 100})
	p.Apply(tools.Event{Kind: tools.EventStreamClosed, StreamID: "none", ClosedAt: 100})
	p.Apply(tools.Event{Kind: tools.EventCallStarted, StreamID: "s", ToolCallID: "b", Name: "t"})
	p.Apply(tools.Event{Kind: tools.EventStreamClosed, StreamID: "s", ClosedAt: 200})
	if got, want := closedAt(&p), map[string]int64{"s": 100, "e": 100}; !maps.Equal(got, want) {
		t.Fatalf("closed times %v, want %v", got, want)
	}
	p.Apply(tools.Event{Kind: tools.EventCallCompleted, StreamID: "e", ToolCallID: "d"})
	p.Apply(tools.Event{Kind: tools.EventCallCompleted, StreamID: "s", ToolCallID: "a"})
	if got, want := closedAt(&p), map[string]int64{"s": 100}; !maps.Equal(got, want) {
		t.Fatalf("closed times once e has no call left: %v, want %v", got, want)
	}
	var q tools.PendingCalls
	q.Apply(tools.Event{Kind: tools.EventRestored, State: p.State()})
	if got := closedAt(&q); !maps.Equal(got, closedAt(&p)) {
		t.Errorf("restored closed times %v, want %v", got, closedAt(&p))
	}
	q.Apply(tools.Event{Kind: tools.EventStreamOpened, StreamID: "s"})
	if got := closedAt(&q); len(got) != 0 {
		t.Errorf("closed times once s opened: %v, want none", got)
	}
	p.Apply(tools.Event{Kind: tools.EventStreamEnded, StreamID: "s"})
	if got := closedAt(&p); len(got) != 0 {
		t.Errorf("closed times once s ended: %v, want none", got)
	}

	// A state stored before closed times: field 3 absent.
	old, err := proto.Marshal(&messages.RouterState{LastSeq: 1, Calls: []*messages.PendingToolCall{
		{Seq: 1, StreamId: "s", ToolCallId: "a", Name: "t", Args: []byte(`{"x":`)}}})
	if err != nil {
		t.Fatal(err)
	}
	var loaded messages.RouterState
	if err := proto.Unmarshal(old, &loaded); err != nil {
		t.Fatal(err)
	}
	var r tools.PendingCalls
	r.Apply(tools.Event{Kind: tools.EventRestored, State: &loaded})
	if got := closedAt(&r); len(got) != 0 {
		t.Errorf("an old state loaded with closed times %v", got)
	}
	r.Apply(tools.Event{Kind: tools.EventStreamClosed, StreamID: "s", ClosedAt: 300})
	if got := closedAt(&r); got["s"] != 300 {
		t.Errorf("a stream of an old state, once closed: closed at %d, want 300", got["s"])
	}
}
