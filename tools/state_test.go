package tools_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

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

func TestPendingCalls_SnapshotRestore(t *testing.T) {
	var p tools.PendingCalls
	if !p.CallStarted("s", "a", "read", 0) || !p.CallStarted("s", "b", "write", 1) || p.CallStarted("s", "a", "read", 0) {
		t.Fatal("CallStarted")
	}
	p.ChunkAppended("s", "b", `{"pa`)
	p.ChunkAppended("s", "a", `{"x":`)
	if p.ChunkAppended("s", "zz", "lost") {
		t.Fatal("chunk for an unknown call accepted")
	}
	snap := p.Snapshot()
	var q tools.PendingCalls
	q.Restore(snap)
	p.ChunkAppended("s", "a", "1}") // the snapshot is a copy
	q.ChunkAppended("s", "a", "2}")
	a, _ := q.CallCompleted("s", "a")
	if string(a.Args) != `{"x":2}` || a.Name != "read" {
		t.Fatalf("restored call %+v", a)
	}
	if !q.CallStarted("s", "c", "x", 2) {
		t.Fatal("start after restore")
	}
	ended := q.StreamEnded("s")
	if len(ended) != 2 || ended[0].ToolCallID != "b" || ended[1].ToolCallID != "c" || q.Len() != 0 {
		t.Fatalf("StreamEnded %+v", ended)
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
