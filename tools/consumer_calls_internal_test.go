package tools

import (
	"fmt"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// TestConsumerCalls_EndsAlone: the model's END of one of several of the
// consumer's calls on a stream ends that call alone, down to the last
// one, whose END ends the stream; an END of no id ends it at once. A
// frame of a call noted last, written again after such an END, is noted
// again.
func TestConsumerCalls_EndsAlone(t *testing.T) {
	var o consumerCalls
	var p PendingCalls
	o.note("s", "x", &p)
	o.note("s", "x", &p)
	if o.endsAlone("s", "x") {
		t.Fatal("the END of the stream's sole call x ends it alone")
	}
	o.note("s", "y", &p)
	o.note("s", "y", &p)
	for _, call := range []string{"x", "y"} {
		if !o.endsAlone("s", call) {
			t.Fatalf("the END of %s, one of two calls, does not end it alone", call)
		}
	}
	if o.endsAlone("s", "z") || o.endsAlone("s", "") || o.endsAlone("other", "x") {
		t.Fatal("an END of another id, of no id, or of another stream ends a call alone")
	}
	o.ended("s", "y") // x is left
	if o.endsAlone("s", "x") || !o.has("s") {
		t.Fatalf("after the END of y alone: x ends alone %v, stream kept %v; want false, true", o.endsAlone("s", "x"), o.has("s"))
	}
	o.note("s", "y", &p) // y again, the call noted last before its END
	if !o.endsAlone("s", "y") {
		t.Fatal("y, written again after its END, not noted again")
	}
	o.ended("s", "")
	if o.has("s") {
		t.Fatal("the END of no id left the stream")
	}

	// A call of no id beside one with an id: the END of the one with
	// the id ends it alone, and leaves the call of no id.
	o.note("t", "", &p)
	o.note("t", "x", &p)
	if !o.endsAlone("t", "x") {
		t.Fatal("x, beside a call of no id, does not end alone")
	}
	o.ended("t", "x")
	if !o.has("t") || o.endsAlone("t", "x") {
		t.Fatal("after the END of x, the call of no id is not left alone")
	}
}

// TestConsumerCalls_PruneKeepsBusyStreams: past its bound, consumerCalls
// forgets the streams without a pending call written on longest ago, and
// keeps every stream with one.
func TestConsumerCalls_PruneKeepsBusyStreams(t *testing.T) {
	var o consumerCalls
	var a Assembler
	a.Step(messages.StreamingToolCall("busy", "call_b", "record"))
	o.note("busy", "x", &a.Pending)
	for i := range openQuiet + openQuiet/4 + 1 {
		o.note(fmt.Sprint("s", i), "x", &a.Pending)
	}
	if !o.has("busy") {
		t.Error("the stream with a pending call was forgotten")
	}
	if o.has("s0") {
		t.Error("the stream written on first, without a pending call, was kept")
	}
	// Pruned at the stream past the bound: the openQuiet idle ones
	// written on last and the busy one are kept, and one came after.
	if n := len(o.open); n != openQuiet+2 {
		t.Errorf("%d streams kept, want %d", n, openQuiet+2)
	}
}
