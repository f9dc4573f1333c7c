package tools_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/tools"
)

// streamUntil reads frames until one of stream matches stop (included)
// and returns the frames of stream read.
func streamUntil(t *testing.T, conn *actors.Conn, stream string, stop func(*messages.Frame) bool) []*messages.Frame {
	t.Helper()
	ctx := testCtx(t)
	var out []*messages.Frame
	for {
		f, err := conn.Recv(ctx)
		if err != nil {
			t.Fatalf("after %q: %v", lines(out), err)
		}
		if f.GetStreamId() != stream {
			continue
		}
		out = append(out, f)
		if stop(f) {
			return out
		}
	}
}

func isText(text string) func(*messages.Frame) bool {
	return func(f *messages.Frame) bool { return f.GetType() == messages.FrameType_TEXT && f.GetText() == text }
}

func toolResults(frames []*messages.Frame) []*messages.Frame {
	var out []*messages.Frame
	for _, f := range frames {
		if f.GetType() == messages.FrameType_TOOL_RESULT {
			out = append(out, f)
		}
	}
	return out
}

// TestStreamingRouter_CancelWhileAssembling: a CANCEL (of the call, or of
// its whole stream) or an ABORT that cuts a call's arguments short
// answers it once as cancelled, and what more of it comes (the rest of its
// arguments, its completion, the end of the stream) neither runs it nor
// answers it again. A CANCEL of another call leaves it assembling, and
// the end of the stream answers it as invalid arguments, as a stream that
// ends without a cancel does.
func TestStreamingRouter_CancelWhileAssembling(t *testing.T) {
	cases := []struct {
		name   string
		cancel *messages.Frame // nil: none
		rest   bool            // the rest of the call comes after the cancel
		kind   tools.FailureKind
		says   string
	}{
		{"cancel of the call", messages.Cancel("s", "call_a"), true, tools.FailureCancelled, "was cancelled before its arguments were complete"},
		{"cancel of the stream", messages.Cancel("s", ""), false, tools.FailureCancelled, "was cancelled before its arguments were complete"},
		{"abort", messages.Abort("s"), true, tools.FailureCancelled, "was aborted before its arguments were complete"},
		{"cancel of another call", messages.Cancel("s", "call_other"), false, tools.FailureInvalidArguments, "the stream ended before the arguments were complete"},
		{"no cancel", nil, false, tools.FailureInvalidArguments, "the stream ended before the arguments were complete"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec, tool := newArgsTool(t)
			spec, err := tools.NewStreamingRouter(echoModel(), &tools.RouterOptions{Tools: []*tools.Tool{tool}})
			if err != nil {
				t.Fatal(err)
			}
			conn := start(t, newRuntime(t), spec)
			// The marker comes out of the model after the call's first
			// chunk: the router has it by then.
			send(t, conn, messages.StreamingToolCall("s", "call_a", "record"),
				messages.ToolArgChunk("s", "call_a", argsA[:9]), messages.Text("s", "marker"))
			streamUntil(t, conn, "s", isText("marker"))
			if tc.cancel != nil {
				send(t, conn, tc.cancel)
			}
			if tc.rest {
				send(t, conn, messages.ToolArgChunk("s", "call_a", argsA[9:]), messages.ToolComplete("s", "call_a"))
			}
			send(t, conn, messages.End("s"))
			out := streamUntil(t, conn, "s", isEnd)
			// The results go into the model before it has the marker sent
			// once the END is out: it gives them back before the marker.
			send(t, conn, messages.Text("s", "after"))
			out = append(out, streamUntil(t, conn, "s", isText("after"))...)
			results := toolResults(out)
			if len(results) != 1 {
				t.Fatalf("got %d results in %q, want one", len(results), lines(out))
			}
			r := results[0]
			if r.GetToolCallId() != "call_a" || tools.KindOf(r) != tc.kind || !strings.Contains(string(r.GetPayload()), tc.says) {
				t.Errorf("result %s, want %s saying %q", line(r), tc.kind, tc.says)
			}
			if got := rec.got("a"); len(got) != 0 {
				t.Errorf("the call ran with %q", got)
			}
		})
	}
}

// TestDurableRouter_CancelWhileAssemblingIsPersisted: the durable router
// persists that a call cut short by a CANCEL is answered, so a router
// recovered after a crash does not take it for pending and does not
// answer it a second time when its stream ends.
func TestDurableRouter_CancelWhileAssemblingIsPersisted(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	rec, tool := newArgsTool(t)
	rt := runtimeWith(t, nil)
	conn, err := rt.Start(durableRouter(t, store, tool, 0))
	if err != nil {
		t.Fatal(err)
	}
	// A call on another stream stays pending: the recovered router lists it.
	send(t, conn, messages.StreamingToolCall("keep", "call_k", "record"))
	waitState(t, conn, "keep", "started")
	send(t, conn, messages.StreamingToolCall("s", "call_a", "record"), messages.ToolArgChunk("s", "call_a", argsA[:9]))
	waitState(t, conn, "s", "started")
	send(t, conn, messages.Cancel("s", ""))
	if ev, _ := waitState(t, conn, "s", "cancelled"); ev.ToolCallID != "call_a" || ev.StreamPending != 0 || ev.Pending != 1 {
		t.Errorf("cancelled state = %+v, want call_a, none pending on s, 1 in all", ev)
	}
	cancelled := toolResults(streamUntil(t, conn, "s", func(f *messages.Frame) bool {
		return f.GetType() == messages.FrameType_TOOL_RESULT
	}))
	if tools.KindOf(cancelled[0]) != tools.FailureCancelled {
		t.Fatalf("result %s, want cancelled", line(cancelled[0]))
	}

	rt.System().Root.Send(conn.Ref().PID(), crashNow{})
	send(t, conn, messages.Text("keep", "back")) // its consumer writes on it again
	if ev, _ := waitState(t, conn, "keep", "recovered"); ev.Pending != 1 {
		t.Errorf("recovered state = %+v, want call_k alone pending", ev)
	}
	send(t, conn, messages.ToolArgChunk("s", "call_a", argsA[9:]), messages.ToolComplete("s", "call_a"), messages.End("s"))
	out := streamUntil(t, conn, "s", isEnd)
	send(t, conn, messages.Text("s", "after"))
	if out = append(out, streamUntil(t, conn, "s", isText("after"))...); len(toolResults(out)) != 0 {
		t.Errorf("the cancelled call was answered again: %q", lines(out))
	}
	if got := rec.got("a"); len(got) != 0 {
		t.Errorf("the cancelled call ran with %q", got)
	}
}

// cutModel answers a request with a streaming call whose arguments it
// leaves half sent, then a marker, and ends its response when it is
// cancelled or aborted; it answers a request that carries tool results
// with the TEXT "done" and END.
func cutModel() actors.Spec {
	var followUp bool // the request being sent carries tool results
	return actors.Duplex("model", func(f *messages.Frame, emit func(*messages.Frame)) {
		stream := f.GetStreamId()
		switch f.GetType() {
		case messages.FrameType_PARAM:
			if f.IsParam(models.ParamMessages) {
				followUp = strings.Contains(string(f.GetPayload()), `"role":"tool"`)
			}
		case messages.FrameType_END:
			if followUp {
				emit(messages.Text(stream, "done"))
				emit(messages.End(stream))
				return
			}
			emit(messages.StreamingToolCall(stream, "call_a", "record"))
			emit(messages.ToolArgChunk(stream, "call_a", argsA[:9]))
			emit(messages.Text(stream, "marker"))
		case messages.FrameType_CANCEL, messages.FrameType_ABORT:
			emit(messages.End(stream))
		}
	})
}

// TestLoop_CancelWhileAssembling: the tool loop answers a call whose
// arguments a CANCEL or ABORT cut short as cancelled, not as invalid
// arguments, and that is the result its session keeps: the session
// resumed later gives that result again, no other, and carries on to the
// model's answer.
func TestLoop_CancelWhileAssembling(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cancel *messages.Frame
		says   string
	}{
		{"cancel", messages.Cancel("s", ""), "was cancelled before its arguments were complete"},
		{"abort", messages.Abort("s"), "was aborted before its arguments were complete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := memstore.New(nil)
			t.Cleanup(func() { store.Close() })
			rec, tool := newArgsTool(t)
			rt := newRuntime(t)
			run := func(name string, cancel bool) []*messages.Frame {
				t.Helper()
				loop, err := tools.NewLoop(cutModel(), &tools.LoopOptions{
					RouterOptions: tools.RouterOptions{Name: name, Tools: []*tools.Tool{tool}},
					Session:       &tools.SessionOptions{ID: "session", Store: store},
				})
				if err != nil {
					t.Fatal(err)
				}
				conn := start(t, rt, loop)
				send(t, conn, messages.RawParam("s", "messages", raw(`[{"role":"user","content":"record"}]`)), messages.End("s"))
				var out []*messages.Frame
				if cancel {
					out = streamUntil(t, conn, "s", isText("marker"))
					send(t, conn, tc.cancel)
				}
				return append(out, streamUntil(t, conn, "s", isEnd)...)
			}
			out := run("loop-1", true)
			results := toolResults(out)
			if len(results) != 1 || tools.KindOf(results[0]) != tools.FailureCancelled ||
				!strings.Contains(string(results[0].GetPayload()), tc.says) {
				t.Fatalf("got %q, want one cancelled result saying %q", lines(out), tc.says)
			}
			again := run("loop-2", false)
			if got := toolResults(again); len(got) != 1 || !sameResult(got[0], results[0]) || !slices.ContainsFunc(again, isText("done")) {
				t.Errorf("resumed: got %q, want the call's result once, as before (%s), and the model's answer", lines(again), line(results[0]))
			}
			if got := rec.got("a"); len(got) != 0 {
				t.Errorf("the call ran with %q", got)
			}
		})
	}
}

// cancelledModel answers "go" with a streaming call whose arguments it
// leaves half sent, and a CANCEL or ABORT of the stream as model adapters
// do (ERROR "cancelled", then END); it gives back the results written into
// it and the TEXT "after".
func cancelledModel() actors.Spec {
	return actors.Duplex("model", func(f *messages.Frame, emit func(*messages.Frame)) {
		stream := f.GetStreamId()
		switch f.GetType() {
		case messages.FrameType_TEXT:
			if f.GetText() == "go" {
				emit(messages.StreamingToolCall(stream, "call_a", "record"))
				emit(messages.ToolArgChunk(stream, "call_a", argsA[:9]))
				return
			}
			emit(f)
		case messages.FrameType_CANCEL, messages.FrameType_ABORT:
			emit(messages.Error(stream, models.ErrCancelled.Error()))
			emit(messages.End(stream))
		case messages.FrameType_TOOL_RESULT:
			emit(f)
		}
	})
}

// TestStreamingRouter_CancelBeforeTheCall: a CANCEL of the stream or an
// ABORT sent right after the request reaches the router before the call
// the model starts in answer (the model sees it only once the router has
// passed it on); the model then ends the stream with ERROR, cutting the
// call short, and the router answers it once as cancelled, not as
// invalid arguments.
func TestStreamingRouter_CancelBeforeTheCall(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cancel  *messages.Frame
		durable bool
		says    string
	}{
		{"cancel", messages.Cancel("s", ""), false, "was cancelled before its arguments were complete"},
		{"abort", messages.Abort("s"), false, "was aborted before its arguments were complete"},
		{"durable cancel", messages.Cancel("s", ""), true, "was cancelled before its arguments were complete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, tool := newArgsTool(t)
			opts := &tools.RouterOptions{Tools: []*tools.Tool{tool}}
			if tc.durable {
				store := memstore.New(nil)
				t.Cleanup(func() { store.Close() })
				opts.Durability = &tools.DurabilityOptions{Store: store}
			}
			spec, err := tools.NewStreamingRouter(cancelledModel(), opts)
			if err != nil {
				t.Fatal(err)
			}
			conn := start(t, newRuntime(t), spec)
			send(t, conn, messages.Text("s", "go"), tc.cancel)
			out := streamUntil(t, conn, "s", isEnd)
			send(t, conn, messages.Text("s", "after"))
			out = append(out, streamUntil(t, conn, "s", isText("after"))...)
			results := toolResults(out)
			if len(results) != 1 || results[0].GetToolCallId() != "call_a" || tools.KindOf(results[0]) != tools.FailureCancelled ||
				!strings.Contains(string(results[0].GetPayload()), tc.says) {
				t.Fatalf("got %q, want one cancelled result saying %q", lines(out), tc.says)
			}
			if got := rec.got("a"); len(got) != 0 {
				t.Errorf("the call ran with %q", got)
			}
		})
	}
}

// errorModel answers a request with a complete streaming call (call_b),
// then one whose arguments it leaves half sent (call_a), then a marker. It
// answers a CANCEL of the stream or an ABORT as model adapters do (ERROR
// "cancelled", then END), ignores a CANCEL naming a call, as they do, and
// ends its response at the TEXT "finish".
func errorModel() actors.Spec {
	return actors.Duplex("model", func(f *messages.Frame, emit func(*messages.Frame)) {
		stream := f.GetStreamId()
		switch f.GetType() {
		case messages.FrameType_END:
			emit(messages.StreamingToolCall(stream, "call_b", "record"))
			emit(messages.ToolArgChunk(stream, "call_b", argsB))
			emit(messages.ToolComplete(stream, "call_b"))
			emit(messages.StreamingToolCall(stream, "call_a", "record"))
			emit(messages.ToolArgChunk(stream, "call_a", argsA[:9]))
			emit(messages.Text(stream, "marker"))
		case messages.FrameType_TEXT:
			if f.GetText() == "finish" {
				emit(messages.End(stream))
			}
		case messages.FrameType_CANCEL, messages.FrameType_ABORT:
			if f.GetType() == messages.FrameType_CANCEL && f.GetToolCallId() != "" {
				return
			}
			emit(messages.Error(stream, models.ErrCancelled.Error()))
			emit(messages.End(stream))
		}
	})
}

// TestLoop_CancelAnsweredWithError: a model that answers the loop's CANCEL
// of the stream or ABORT with ERROR and END, as adapters do, gets every
// call of its response answered as cancelled, the complete one not yet run
// as the one cut short (not as stopped by a failed stream), and the
// stream ends with that ERROR and END. A CANCEL naming another call does
// not stop the model: the call it leaves incomplete when it ends its
// response is answered as invalid arguments, as in a router, and the loop
// still stops, answering the complete call as cancelled.
func TestLoop_CancelAnsweredWithError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cancel *messages.Frame
		kindA  tools.FailureKind
		saysA  string
		last   messages.FrameType // the frame before the stream's END
	}{
		{"cancel", messages.Cancel("s", ""), tools.FailureCancelled, "was cancelled before its arguments were complete", messages.FrameType_ERROR},
		{"abort", messages.Abort("s"), tools.FailureCancelled, "was aborted before its arguments were complete", messages.FrameType_ERROR},
		{"cancel of another call", messages.Cancel("s", "call_x"), tools.FailureInvalidArguments, "the stream ended before the arguments were complete", messages.FrameType_TOOL_RESULT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, tool := newArgsTool(t)
			loop, err := tools.NewLoop(errorModel(), &tools.LoopOptions{RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{tool}}})
			if err != nil {
				t.Fatal(err)
			}
			conn := start(t, newRuntime(t), loop)
			send(t, conn, messages.RawParam("s", "messages", raw(`[{"role":"user","content":"record"}]`)), messages.End("s"))
			out := streamUntil(t, conn, "s", isText("marker"))
			send(t, conn, tc.cancel, messages.Text("s", "finish"))
			out = append(out, streamUntil(t, conn, "s", isEnd)...)
			got := map[string]*messages.Frame{}
			for _, r := range toolResults(out) {
				if got[r.GetToolCallId()] != nil {
					t.Fatalf("call %s answered twice: %q", r.GetToolCallId(), lines(out))
				}
				got[r.GetToolCallId()] = r
			}
			if a := got["call_a"]; a == nil || tools.KindOf(a) != tc.kindA || !strings.Contains(string(a.GetPayload()), tc.saysA) {
				t.Errorf("call_a: got %q, want %s saying %q", lines(out), tc.kindA, tc.saysA)
			}
			if b := got["call_b"]; b == nil || tools.KindOf(b) != tools.FailureCancelled {
				t.Errorf("call_b: got %q, want cancelled", lines(out))
			}
			if len(got) != 2 || out[len(out)-2].GetType() != tc.last {
				t.Errorf("got %q, want the two results and %s before END", lines(out), tc.last)
			}
			if ran := append(rec.got("a"), rec.got("b")...); len(ran) != 0 {
				t.Errorf("calls ran with %q", ran)
			}
		})
	}
}
