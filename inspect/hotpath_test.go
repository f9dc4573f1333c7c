package inspect

import (
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/tools"
)

// newObserved is an inspector and the observer of one adapter, fed by
// hand as the adapter's actor would feed it.
func newObserved(t *testing.T) (*Inspector, *modelObserver) {
	t.Helper()
	rt := actorstest.NewRuntime(t, nil)
	in, err := New(rt, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
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

// A response that ends in the turn of its request leaves no stream open;
// one that does not is shown open until its END, and a second call
// removed before the first keeps the first pending.
func TestStreams_AnsweredInTheSameTurnNotLeftOpen(t *testing.T) {
	in, o := newObserved(t)
	requestTurn(o, "a", messages.Text("a", "hi"), messages.End("a"))
	requestTurn(o, "b", messages.Text("b", "thinking"))
	streams := func(id string) int { return len(in.Snapshot(id).Session.Streams) }
	if n := streams("a"); n != 0 {
		t.Fatalf("a: %d streams open, want none (answered in its turn)", n)
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

func toolResult(stream string, call, result *messages.Frame) tools.ToolResultEvent {
	return tools.ToolResultEvent{StreamID: stream, Iteration: 1, Call: call, Result: result}
}
