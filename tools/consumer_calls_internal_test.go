package tools

import (
	"fmt"
	"slices"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// opens returns a frame that opens a call of tool-call id call on
// stream: a TOOL_CALL, which begins it, or, for a call of no id, a TEXT.
func opens(stream, call string) *messages.Frame {
	if call == "" {
		return messages.Text(stream, "hi")
	}
	return messages.ToolCall(stream, call, "record", nil)
}

// TestConsumerCalls_EndsAlone: the model's END of one of several of the
// consumer's calls on a stream ends that call alone, down to the last
// one, whose END ends the stream; an END of no id ends it at once. A
// frame of a call noted last, written again after such an END, is noted
// again.
func TestConsumerCalls_EndsAlone(t *testing.T) {
	var o consumerCalls
	o.note(opens("s", "x"))
	o.note(opens("s", "x"))
	if o.endsAlone("s", "x") {
		t.Fatal("the END of the stream's sole call x ends it alone")
	}
	o.note(opens("s", "y"))
	o.note(opens("s", "y"))
	for _, call := range []string{"x", "y"} {
		if !o.endsAlone("s", call) {
			t.Fatalf("the END of %s, one of two calls, does not end it alone", call)
		}
	}
	if o.endsAlone("s", "") || o.endsAlone("other", "x") {
		t.Fatal("an END of no id, or of another stream, ends a call alone")
	}
	if !o.endsAlone("s", "z") {
		t.Fatal("an END of z, which the stream never carried, ends it")
	}
	o.ended("s", "y") // x is left
	if o.endsAlone("s", "x") || !o.has("s") {
		t.Fatalf("after the END of y alone: x ends alone %v, stream kept %v; want false, true", o.endsAlone("s", "x"), o.has("s"))
	}
	o.note(opens("s", "y")) // y again, the call noted last before its END
	if !o.endsAlone("s", "y") {
		t.Fatal("y, written again after its END, not noted again")
	}
	o.ended("s", "")
	if o.has("s") {
		t.Fatal("the END of no id left the stream")
	}

	// A call of no id beside one with an id: the END of the one with
	// the id ends it alone, and leaves the call of no id.
	o.note(opens("t", ""))
	o.note(opens("t", "x"))
	if !o.endsAlone("t", "x") {
		t.Fatal("x, beside a call of no id, does not end alone")
	}
	o.ended("t", "x")
	if !o.has("t") || !o.open["t"].quiet() {
		t.Fatal("after the END of x, the call of no id is not left alone")
	}
}

// quietStream notes on o a stream the consumer wrote a call of no id
// and call x on, whose x the model ended alone: quiet.
func quietStream(o *consumerCalls, stream string) {
	o.note(opens(stream, ""))
	o.note(opens(stream, "x"))
	o.ended(stream, "x")
}

// TestConsumerCalls_PruneKeepsBusyStreams: past its bound, consumerCalls
// forgets, as the runtime does, the quiet streams opened longest ago
// (whatever calls of the model's are pending there), but the first two
// noted, kept inline; it keeps every stream with a call of the
// consumer's open: the model's END of one of several calls there still
// ends it alone.
func TestConsumerCalls_PruneKeepsBusyStreams(t *testing.T) {
	var o consumerCalls
	quietStream(&o, "first")
	quietStream(&o, "second")
	quietStream(&o, "pending") // the model's call is pending there: the runtime knows nothing of it
	o.note(opens("open", "x"))
	o.note(opens("open", "y"))
	for i := range openQuiet + openQuiet/4 {
		quietStream(&o, fmt.Sprint("s", i))
	}
	if !o.has("first") || !o.has("second") {
		t.Error("a stream kept inline was forgotten")
	}
	if !o.endsAlone("open", "x") {
		t.Error("the stream with the consumer's calls x and y open was forgotten: the END of x ends it")
	}
	if o.has("pending") || o.has("s0") {
		t.Error("a quiet stream opened first, not inline, was kept")
	}
	// Pruned as the stream past the bound came, quiet then (the runtime
	// notes the call after it opens the stream): the openQuiet quiet ones
	// opened last, it among them, the one after it, the inline ones and
	// the open one are kept.
	if n := len(o.open); n != openQuiet+4 {
		t.Errorf("%d streams kept, want %d", n, openQuiet+4)
	}

	// However many streams the consumer leaves calls open on, none is
	// forgotten: they are what the runtime keeps of them too.
	for i := range 2 * openQuiet {
		o.note(opens(fmt.Sprint("c", i), "x"))
	}
	if !o.has("c0") || !o.has("open") {
		t.Error("a stream with a call of the consumer's open was forgotten")
	}

	// An inline stream ended leaves its room to the next stream noted.
	o.ended("first", "")
	o.note(opens("third", ""))
	if !o.open["third"].inline || o.inline != openInline {
		t.Errorf("the stream noted after an inline one ended is inline %v, %d inline; want true, %d",
			o.open["third"].inline, o.inline, openInline)
	}
}

// TestConsumerCalls_ModelOpenedStreams: a stream the model opened with
// a frame the router passed out is kept as the runtime keeps it, and
// counted among the streams opened, but holds no call of the
// consumer's; its END ends it. A META opens nothing.
func TestConsumerCalls_ModelOpenedStreams(t *testing.T) {
	var o consumerCalls
	o.emitted(messages.Meta("m", "state", nil))
	if _, ok := o.open["m"]; ok {
		t.Fatal("a META passed out opened its stream")
	}
	o.emitted(messages.Text("m", "said"))
	if _, ok := o.open["m"]; !ok || o.has("m") {
		t.Fatalf("the model's TEXT on m: kept %v, the consumer's %v; want true, false", ok, o.has("m"))
	}
	o.note(opens("m", "x"))
	if !o.has("m") {
		t.Fatal("the consumer's call on the stream the model opened not noted")
	}
	o.emitted(withID(messages.End("m"), "x"))
	if _, ok := o.open["m"]; ok {
		t.Fatal("the model's END of m's sole call left the stream")
	}
	o.emitted(messages.Text("m", "again"))
	if _, ok := o.open["m"]; !ok {
		t.Fatal("the model's TEXT on m, after its END, did not open it again")
	}
}

// TestConsumerCalls_RestOfAnEndedCallOpensNothing: after the model's END
// of y alone, of the consumer's calls x and y on a stream, what more of y
// the consumer wrote (an argument chunk, a frame with its id) opens
// nothing, as for the runtime: the END of x then ends the stream. A
// TOOL_CALL of y begins it again. A second END of y ends nothing. In a
// durable router, whose runtime notes every frame, y's chunk is noted.
func TestConsumerCalls_RestOfAnEndedCallOpensNothing(t *testing.T) {
	twoCalls := func(o *consumerCalls) {
		o.note(opens("s", "x"))
		o.note(opens("s", "y"))
		o.ended("s", "y")
	}
	var o consumerCalls
	twoCalls(&o)
	o.note(messages.ToolArgChunk("s", "y", "{}"))
	o.note(withID(messages.Text("s", "more"), "y"))
	o.note(messages.ToolArgChunk("s", "z", "{}")) // of no call the stream held
	o.note(messages.ToolArgChunk("t", "y", "{}")) // on a stream the consumer opened no call on
	if o.endsAlone("s", "x") || o.has("t") {
		t.Fatalf("the rest of y, or a chunk of no call held, opened a call: x ends alone %v, t held %v", o.endsAlone("s", "x"), o.has("t"))
	}
	o.ended("s", "y") // the model's second END of y
	if !o.has("s") {
		t.Fatal("the model's second END of y ended the stream")
	}
	o.note(opens("s", "y")) // y begun again
	if !o.endsAlone("s", "x") {
		t.Fatal("y, begun again by a TOOL_CALL, not noted")
	}
	o.ended("s", "y")
	o.ended("s", "x")
	if o.has("s") {
		t.Fatal("the END of x, the sole call left, did not end the stream")
	}

	d := consumerCalls{durable: true}
	twoCalls(&d)
	d.note(messages.ToolArgChunk("s", "y", "{}"))
	if !d.endsAlone("s", "x") {
		t.Fatal("a durable router did not note y's chunk, as its runtime does")
	}
}

// withID returns f with tool-call id call.
func withID(f *messages.Frame, call string) *messages.Frame {
	f.ToolCallId = call
	return f
}

// TestConsumerCalls_SecondEndPastEndedMax: a second END of a call the
// model ended, past the endedMax a stream keeps, ends none of the calls
// the stream still holds (one of no id, or one with an id), nor does an
// END of an id the stream never carried: the runtime cannot tell one
// from the other either. So it is on a stream of which the model ended
// no call, while it holds one; on a stream that holds none of the
// consumer's (the model opened it), an END of any id ends it.
func TestConsumerCalls_SecondEndPastEndedMax(t *testing.T) {
	for _, held := range []string{"", "h"} {
		var o consumerCalls
		o.note(opens("s", held))
		for i := range endedMax + 1 {
			c := fmt.Sprint("c", i)
			o.note(opens("s", c))
			o.ended("s", c)
		}
		if slices.Contains(o.open["s"].done, "c0") {
			t.Fatal("c0 still kept among the ended calls")
		}
		for _, call := range []string{"c0", "never"} {
			if !o.endsAlone("s", call) {
				t.Errorf("holding %q: an END of %s taken for the stream's", held, call)
			}
			o.ended("s", call)
			if !o.has("s") {
				t.Fatalf("holding %q: an END of %s ended the stream", held, call)
			}
		}
		if held == "" {
			o.ended("s", "") // the END of no id is the stream's
		} else if o.endsAlone("s", held) {
			t.Errorf("the END of %s, the stream's last call, taken for its alone", held)
		} else {
			o.ended("s", held)
		}
		if o.has("s") {
			t.Errorf("holding %q: the stream's END left it", held)
		}
	}
	for _, held := range [][]string{{""}, {"", "c1"}, {"c1"}} {
		var o consumerCalls
		for _, c := range held {
			o.note(opens("s", c))
		}
		// A stream whose calls carry no id, none ended by an id, is
		// closed by it, as for the runtime: the END of its call.
		closes := len(held) == 1 && held[0] == ""
		if o.endsAlone("s", "c9") == closes {
			t.Errorf("stream of calls %q, none ended: an END of c9 taken for the stream's: %t, want %t", held, !closes, closes)
		}
		if o.ended("s", "c9"); o.has("s") == closes {
			t.Errorf("stream of calls %q, none ended: an END of c9 ended it: %t, want %t", held, !o.has("s"), closes)
		}
	}
	var o consumerCalls
	o.emitted(messages.Text("m", "said"))
	if o.endsAlone("m", "c9") {
		t.Error("on a stream the model opened, an END of c9 taken for a call's alone")
	}
	if o.ended("m", "c9"); len(o.open) != 0 {
		t.Error("on a stream the model opened, an END of c9 left it open")
	}
}

// TestConsumerCalls_ModelOpenedStreamPrunedOpensAgain: a stream the model
// opened, the last one the router passed a frame out on, forgotten by a
// pruning as the runtime forgets it, is opened again by the model's next
// frame there, as the runtime opens it again, now the one opened last: it
// outlives the streams opened before it (s256, kept by the first pruning)
// at the next one.
func TestConsumerCalls_ModelOpenedStreamPrunedOpensAgain(t *testing.T) {
	var o consumerCalls
	quietStream(&o, "first")
	quietStream(&o, "second")
	o.emitted(messages.Text("m", "said"))
	for i := range openQuiet + openQuiet/4 {
		quietStream(&o, fmt.Sprint("s", i))
	}
	if _, ok := o.open["m"]; ok {
		t.Fatal("the stream the model opened first, quiet, outlived the pruning")
	}
	o.emitted(messages.Text("m", "again"))
	if _, ok := o.open["m"]; !ok {
		t.Fatal("the model's TEXT on m, after m was forgotten, did not open it again")
	}
	for i := range openQuiet / 4 {
		quietStream(&o, fmt.Sprint("t", i))
	}
	_, m := o.open["m"]
	if _, s := o.open["s256"]; !m || s {
		t.Errorf("after the next pruning: m kept %v, s256 kept %v; want true, false", m, s)
	}
}
