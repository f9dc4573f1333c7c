package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// TestDurableRouter_RestartsDoNotPutOffTheLimit: a router restarted more
// often than RecoveredTimeout still ends its recovered calls: the limit
// of a call counts from the recovery that first closed its stream, not
// from the last one, and the end is for good.
func TestDurableRouter_RestartsDoNotPutOffTheLimit(t *testing.T) {
	bothRestarts(t, func(t *testing.T, kind restartKind) {
		h := startLimited(t, kind, time.Hour)
		send(t, h.conn, messages.StreamingToolCall("s", "call_a", "record"), messages.ToolArgChunk("s", "call_a", argsA[:9]))
		waitState(t, h.conn, "s", "started")
		h.restart("p") // call_a recovered: its limit runs from now

		time.Sleep(40 * time.Minute)
		h.restart("p2") // call_a recovered again, call_p for the first time
		time.Sleep(20*time.Minute + time.Second)
		if r := results(t, h.got, 1)[0]; r.GetToolCallId() != "call_a" || tools.KindOf(r) != tools.FailureStopped {
			t.Errorf("result an hour after call_a's first recovery: %s, want call_a stopped", line(r))
		}
		time.Sleep(40*time.Minute - 2*time.Second)
		stoppedAtLimit(t, h, "call_p", "an hour after its first recovery")
		h.restart("p3")
		notRecovered(t, h.conn, "s")
		notRecovered(t, h.conn, "p")
		results(t, h.got, 0)
	})
}

// recoveredOnS starts a supervised limitedRouter (limit an hour) around
// the model that model makes, starts call_a on stream s, and restarts
// the router: call_a is recovered, and s closed.
func recoveredOnS(t *testing.T, model func(got chan<- *messages.Frame) actors.Spec) *limitedRouter {
	t.Helper()
	h := startLimitedWith(t, restartSupervised, time.Hour, model)
	send(t, h.conn, messages.StreamingToolCall("s", "call_a", "record"), messages.ToolArgChunk("s", "call_a", argsA[:9]))
	waitState(t, h.conn, "s", "started")
	h.restart("p")
	return h
}

// endedAtTheLimit is recoveredOnS, once the limit has passed and call_a
// was ended: s stays closed.
func endedAtTheLimit(t *testing.T, model func(got chan<- *messages.Frame) actors.Spec) *limitedRouter {
	t.Helper()
	h := recoveredOnS(t, model)
	time.Sleep(h.limit + time.Second)
	if r := results(t, h.got, 1)[0]; r.GetToolCallId() != "call_a" {
		t.Fatalf("result at the limit: %s, want call_a's", line(r))
	}
	return h
}

// startModel is resultsModel that, for a META frame named "start"
// written into it, starts a streaming call of record, call_m, on its
// stream, and for one named "finish" completes call_m with arguments,
// instead of echoing them.
func startModel(got chan<- *messages.Frame) actors.Spec {
	return actors.Duplex("model", startFrames(got))
}

// startFrames is what startModel does with a frame.
func startFrames(got chan<- *messages.Frame) actors.FrameHandler {
	return func(f *messages.Frame, emit func(*messages.Frame)) {
		switch {
		case f.GetType() == messages.FrameType_TOOL_RESULT:
			got <- f
		case f.GetType() == messages.FrameType_META && f.GetName() == "start":
			emit(messages.StreamingToolCall(f.GetStreamId(), "call_m", "record"))
			return
		case f.GetType() == messages.FrameType_META && f.GetName() == "finish":
			emit(messages.ToolArgChunk(f.GetStreamId(), "call_m", `{"id":"m"}`))
			emit(messages.ToolComplete(f.GetStreamId(), "call_m"))
			return
		}
		emit(f)
	}
}

// TestDurableRouter_CallStartedOnAClosedStreamEnds: a call the model
// starts on a stream a restart closed, after the limit of the calls
// recovered there has passed, does not wait for an END of the model that
// may never come: it is ended at its own limit, for good, and nothing
// of it goes out on the closed stream.
func TestDurableRouter_CallStartedOnAClosedStreamEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := endedAtTheLimit(t, startModel)

		send(t, h.conn, messages.Meta("s", "start", nil)) // the model starts call_m on the closed stream
		synctest.Wait()
		time.Sleep(h.limit - time.Second)
		results(t, h.got, 0)
		time.Sleep(2 * time.Second)
		if r := results(t, h.got, 1)[0]; r.GetToolCallId() != "call_m" || tools.KindOf(r) != tools.FailureStopped {
			t.Errorf("result of the call started on the closed stream: %s, want call_m stopped", line(r))
		}
		if got := onStream(probe(t, h.conn, "q"), "s"); len(got) != 0 {
			t.Errorf("the closed stream s got %q", lines(got))
		}
		h.restart("p2")
		notRecovered(t, h.conn, "s")
	})
}

// TestDurableRouter_RestoreErrorOnAClosedStreamIsSilent: a restore frame
// that cannot be decoded, written on a stream a restart closed, is not
// answered there: nothing goes out on a closed stream until the consumer
// opens a call on it again. On an open stream it is answered.
func TestDurableRouter_RestoreErrorOnAClosedStreamIsSilent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := recoveredOnS(t, resultsModel)
		bad := func(stream string) *messages.Frame {
			f := messages.Meta(stream, "restore", nil)
			f.Meta = &messages.Metadata{Durability: &messages.Durability{WrapperId: "r1", RestoreState: []byte{0xff}}}
			return f
		}
		send(t, h.conn, bad("s"), bad("p"))
		seen := probe(t, h.conn, "q")
		if got := onStream(seen, "s"); len(got) != 0 {
			t.Errorf("the closed stream s got %q", lines(got))
		}
		if !slices.ContainsFunc(onStream(seen, "p"), func(f *messages.Frame) bool { return f.GetName() == "restore_error" }) {
			t.Errorf("the open stream p got %q, want a restore_error", lines(onStream(seen, "p")))
		}
	})
}

// holdModel is resultsModel that holds the TOOL_RESULTs written into it
// and echoes them on their stream only when a TEXT "release" is written
// there, before that TEXT: an inner duplex whose echo of a result comes
// late.
func holdModel(got chan<- *messages.Frame) actors.Spec { return echoHeld(got, 1) }

// twiceModel is holdModel that echoes each result it holds twice.
func twiceModel(got chan<- *messages.Frame) actors.Spec { return echoHeld(got, 2) }

// echoHeld is holdModel that echoes each result it holds times times;
// with got nil, it tells the test of none.
func echoHeld(got chan<- *messages.Frame, times int) actors.Spec {
	var held []*messages.Frame
	return actors.Duplex("model", func(f *messages.Frame, emit func(*messages.Frame)) {
		switch {
		case f.GetType() == messages.FrameType_TOOL_RESULT:
			if got != nil {
				got <- f
			}
			held = append(held, f)
			return
		case f.GetType() == messages.FrameType_TEXT && f.GetText() == "release":
			for _, r := range held {
				if r.GetStreamId() == f.GetStreamId() {
					for range times {
						emit(r)
					}
				}
			}
			held = slices.DeleteFunc(held, func(r *messages.Frame) bool { return r.GetStreamId() == f.GetStreamId() })
		}
		emit(f)
	})
}

// releaseKeepsIn has the consumer write "release" on stream s, where the
// model echoes the results it holds, and checks that the text alone goes
// out.
func releaseKeepsIn(t *testing.T, h *limitedRouter) {
	t.Helper()
	send(t, h.conn, messages.Text("s", "release"))
	if out := streamUntil(t, h.conn, "s", isText("release")); len(out) != 1 {
		t.Errorf("stream s written on again got %q, want the echo of its text alone", lines(out))
	}
}

// TestDurableRouter_LateEchoOfAnEndedCallStaysIn: the echo of the result
// of a call ended at the limit, which its model emits only after the
// consumer wrote on the stream again, does not go out there: the
// consumer, told of no recovered call on it, gets no result of one.
func TestDurableRouter_LateEchoOfAnEndedCallStaysIn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := endedAtTheLimit(t, holdModel)

		releaseKeepsIn(t, h)
		// A result of a call of the reopened stream goes out as ever.
		send(t, h.conn, messages.StreamingToolCall("s", "call_b", "record"), messages.ToolArgChunk("s", "call_b", argsB),
			messages.ToolComplete("s", "call_b"))
		waitState(t, h.conn, "s", "completed")
		results(t, h.got, 1)
		send(t, h.conn, messages.Text("s", "release"))
		out := streamUntil(t, h.conn, "s", isText("release"))
		if !slices.ContainsFunc(out, func(f *messages.Frame) bool {
			return f.GetType() == messages.FrameType_TOOL_RESULT && f.GetToolCallId() == "call_b"
		}) {
			t.Errorf("stream s got %q, want call_b's result echoed", lines(out))
		}
	})
}

// quietOnErrorsModel is resultsModel that does not echo error results:
// the echo of a call ended at the limit never comes, as with a model
// adapter that ignores what it cannot place, while the results of the
// calls it made since are echoed.
func quietOnErrorsModel(got chan<- *messages.Frame) actors.Spec {
	return actors.Duplex("model", func(f *messages.Frame, emit func(*messages.Frame)) {
		if f.GetType() == messages.FrameType_TOOL_RESULT {
			got <- f
			if f.IsErrorResult() {
				return
			}
		}
		emit(f)
	})
}

// newCallA has the consumer write on stream s again a call with the id of
// the call ended there, call_a, which the model starts too, and waits for
// the new call's result in the model.
func newCallA(t *testing.T, h *limitedRouter) {
	t.Helper()
	send(t, h.conn, messages.StreamingToolCall("s", "call_a", "record"), messages.ToolArgChunk("s", "call_a", argsA),
		messages.ToolComplete("s", "call_a"))
	waitState(t, h.conn, "s", "completed")
	if r := results(t, h.got, 1)[0]; r.GetToolCallId() != "call_a" || r.IsErrorResult() {
		t.Fatalf("result of the new call_a: %s", line(r))
	}
}

// TestDurableRouter_NewCallReusingAnIDIsEchoed: the model never echoes
// the result of a call ended at the limit on a closed stream; the
// consumer writes on the stream again and the model starts a new call
// with the same id (many models number the calls of each response from
// call_0): that call's result is echoed out on the stream, not taken for
// the echo of the ended call's.
func TestDurableRouter_NewCallReusingAnIDIsEchoed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := endedAtTheLimit(t, quietOnErrorsModel)

		newCallA(t, h)
		send(t, h.conn, messages.Text("s", "after"))
		out := streamUntil(t, h.conn, "s", isText("after"))
		if !slices.ContainsFunc(out, func(f *messages.Frame) bool {
			return f.GetType() == messages.FrameType_TOOL_RESULT && f.GetToolCallId() == "call_a" && !f.IsErrorResult()
		}) {
			t.Errorf("stream s got %q, want the new call_a's result echoed", lines(out))
		}
		if slices.ContainsFunc(out, func(f *messages.Frame) bool { return tools.KindOf(f) == tools.FailureStopped }) {
			t.Errorf("stream s got the ended call's result: %q", lines(out))
		}
	})
}

// TestDurableRouter_ClosedStreamsAreBounded: restore frames that each put
// a call on a stream of their own, which the consumer never opened,
// close those streams one after the other; each restore drops the call
// of the one before. The router keeps silent no more than the last 256
// such streams without a pending call: the model's frames on the first
// (a TICK it echoes) go out again, while a recent one, and the one whose
// call is pending, stay silent.
func TestDurableRouter_ClosedStreamsAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startLimited(t, restartSupervised, time.Hour)
		const n = 300
		stream := func(i int) string { return fmt.Sprintf("u%d", i) }
		for i := range n {
			restore, err := tools.RestoreFrame("x", "r1", restoredState(stream(i)))
			if err != nil {
				t.Fatal(err)
			}
			send(t, h.conn, restore)
		}
		last, recent, first := stream(n-1), stream(n-10), stream(0)
		send(t, h.conn, messages.Tick(last), messages.Tick(recent), messages.Tick(first))
		seen := probe(t, h.conn, "p")
		if got := onStream(seen, first); !slices.Equal(typesOf(got), []string{"TICK"}) {
			t.Errorf("the first stream closed, quiet for %d restores, got %q: want the TICK echoed", n-1, lines(got))
		}
		for _, s := range []string{last, recent} {
			if got := onStream(seen, s); len(got) != 0 {
				t.Errorf("closed stream %s got %q", s, lines(got))
			}
		}
		// The call of the last stream still waits for its consumer.
		send(t, h.conn, messages.Text(last, "back"))
		if ev, _ := waitState(t, h.conn, last, "restored"); !slices.Equal(ev.ToolCallIDs, []string{"call_" + last}) {
			t.Errorf("restored on %s once written on: %+v", last, ev)
		}
	})
}

// noResultsModel echoes every frame written into it but TOOL_RESULTs and
// CANCELs: what it emits on a stream after a CANCEL is what came after.
func noResultsModel(chan<- *messages.Frame) actors.Spec {
	return actors.Duplex("model", func(f *messages.Frame, emit func(*messages.Frame)) {
		if t := f.GetType(); t != messages.FrameType_TOOL_RESULT && t != messages.FrameType_CANCEL {
			emit(f)
		}
	})
}

// TestDurableRouter_ClosedStreamsGoAsTheyLostTheirCalls: a restart closes
// 300 streams at once, each with a recovered call, which CANCELs then end
// one stream after the other. Past 256 closed streams without a pending
// call, the router forgets those that lost their last call first, not
// those it happened to close first: the model's frames on the first 44
// streams cancelled go out again, those on the others stay in.
func TestDurableRouter_ClosedStreamsGoAsTheyLostTheirCalls(t *testing.T) {
	h := startLimitedWith(t, restartSupervised, time.Hour, noResultsModel)
	const n = 300
	stream := func(i int) string { return fmt.Sprintf("q%d", i) }
	calls := make([]*messages.Frame, n)
	for i := range n {
		calls[i] = messages.StreamingToolCall(stream(i), "call_"+stream(i), "record")
	}
	send(t, h.conn, calls...)
	waitState(t, h.conn, stream(n-1), "started")
	h.restart("p")
	cancels := make([]*messages.Frame, n)
	for i := range n {
		cancels[i] = messages.Cancel(stream(i), "")
	}
	send(t, h.conn, cancels...)
	restore, err := tools.RestoreFrame("x", "r1", restoredState("z")) // closes z: the closed streams are pruned
	if err != nil {
		t.Fatal(err)
	}
	send(t, h.conn, restore)
	forgotten, kept := []string{stream(0), stream(n - closedQuiet - 1)}, []string{stream(n - closedQuiet), stream(n - 1)}
	for _, s := range append(slices.Clone(forgotten), kept...) {
		send(t, h.conn, messages.Tick(s))
	}
	seen := probe(t, h.conn, "p2")
	for _, s := range forgotten {
		if got := onStream(seen, s); !slices.Equal(typesOf(got), []string{"TICK"}) {
			t.Errorf("stream %s, among the first to lose its call, got %q: want the TICK echoed", s, lines(got))
		}
	}
	for _, s := range kept {
		if got := onStream(seen, s); len(got) != 0 {
			t.Errorf("closed stream %s, among the last to lose its call, got %q", s, lines(got))
		}
	}
}

// closedQuiet is how many closed streams without a pending call a durable
// router keeps.
const closedQuiet = 256

// TestDurableRouter_LateEchoAfterANewCallOfItsID: the model starts a new
// call with the id of a call ended at the limit before it echoes the
// ended call's result (it echoes results late, after the new call's
// TOOL_CALL): the echo, told from the new call's result by its content,
// does not go out, and the new call's result does.
func TestDurableRouter_LateEchoAfterANewCallOfItsID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := endedAtTheLimit(t, holdModel)

		newCallA(t, h)
		send(t, h.conn, messages.Text("s", "release")) // the model echoes the ended call's result, then the new one's
		out := streamUntil(t, h.conn, "s", isText("release"))
		var echoed []*messages.Frame
		for _, f := range out {
			if f.GetType() == messages.FrameType_TOOL_RESULT {
				echoed = append(echoed, f)
			}
		}
		if len(echoed) != 1 || echoed[0].GetToolCallId() != "call_a" || echoed[0].IsErrorResult() {
			t.Errorf("stream s got the results %q, want the new call_a's alone", lines(echoed))
		}
	})
}

// TestDurableRouter_CallStartedOnAClosedStreamWaitsFromItsStartAcrossSnapshots:
// the start of a call the model makes on a closed stream and the time it
// waits from are one write; with a snapshot asked for at every write (the
// state before it), a restart of the process replays them, and the call
// is ended at the limit counted from its start, not from the recovery.
func TestDurableRouter_CallStartedOnAClosedStreamWaitsFromItsStartAcrossSnapshots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startLimitedWith(t, restartRuntime, time.Hour, startModel)
		h.every = 1
		send(t, h.conn, messages.StreamingToolCall("s", "call_a", "record"), messages.ToolArgChunk("s", "call_a", argsA[:9]))
		waitState(t, h.conn, "s", "started")
		h.restart("p") // s closed, call_a waits from now
		time.Sleep(h.limit + time.Second)
		if r := results(t, h.got, 1)[0]; r.GetToolCallId() != "call_a" {
			t.Fatalf("result at the limit: %s, want call_a's", line(r))
		}

		send(t, h.conn, messages.Meta("s", "start", nil)) // the model starts call_m on the closed stream
		synctest.Wait()
		time.Sleep(h.limit / 2)
		h.restart("p2")
		time.Sleep(h.limit/2 - time.Second)
		stoppedAtLimit(t, h, "call_m", "at the limit from its start")
		h.restart("p3")
		notRecovered(t, h.conn, "s")
	})
}

// stoppedAtLimit checks, just before the limit of call on h, that the
// model got no result, and 2 seconds later that it got call's alone,
// stopped.
func stoppedAtLimit(t *testing.T, h *limitedRouter, call, when string) {
	t.Helper()
	synctest.Wait()
	results(t, h.got, 0)
	time.Sleep(2 * time.Second)
	if r := results(t, h.got, 1)[0]; r.GetToolCallId() != call || tools.KindOf(r) != tools.FailureStopped {
		t.Errorf("result %s: %s, want %s stopped", when, line(r), call)
	}
}

// startGated starts a supervised limitedRouter (limit an hour) around the
// model that model makes, whose record tool returns only once release is
// closed (or its call is cancelled).
func startGated(t *testing.T, model func(got chan<- *messages.Frame) actors.Spec) (h *limitedRouter, release chan struct{}) {
	t.Helper()
	release = make(chan struct{})
	tool, err := tools.New(tools.Definition{Name: "record", Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return map[string]bool{"ok": true}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return startLimitedTool(t, restartSupervised, time.Hour, model, memstore.New(nil), tool), release
}

// isResultOf returns whether a frame is the TOOL_RESULT of call.
func isResultOf(call string) func(*messages.Frame) bool {
	return func(f *messages.Frame) bool {
		return f.GetType() == messages.FrameType_TOOL_RESULT && f.GetToolCallId() == call
	}
}

// TestDurableRouter_CallRunOnAClosedStreamStaysIn: the model starts and
// completes call_m on a stream a restart closed, so the consumer is told
// of no such call, and it runs. The consumer writes on the stream again
// while it runs: the echo of its result, which comes after that, does
// not go out, as that of any call of the closed stream: whether the
// router expects the echo is decided when the call runs, not when its
// result comes.
func TestDurableRouter_CallRunOnAClosedStreamStaysIn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, release := startGated(t, startModel)
		send(t, h.conn, messages.StreamingToolCall("s", "call_a", "record"))
		waitState(t, h.conn, "s", "started")
		h.restart("p") // call_a is recovered, and s closed

		send(t, h.conn, messages.Meta("s", "start", nil), messages.Meta("s", "finish", nil)) // call_m runs
		synctest.Wait()
		send(t, h.conn, messages.Text("s", "back"))
		if ev, _ := waitState(t, h.conn, "s", "recovered"); !slices.Equal(ev.ToolCallIDs, []string{"call_a"}) {
			t.Errorf("recovered on s: %+v, want call_a alone", ev)
		}
		close(release)
		if r := nextResult(t, h.got); r.GetToolCallId() != "call_m" || r.IsErrorResult() {
			t.Fatalf("the model got %s, want call_m's result", line(r))
		}
		send(t, h.conn, messages.Text("s", "after"))
		if out := streamUntil(t, h.conn, "s", isText("after")); slices.ContainsFunc(out, isResultOf("call_m")) {
			t.Errorf("stream s got %q: the consumer, told of no call_m there, got its result", lines(out))
		}
	})
}

// runThenCloseS has the consumer stream call on stream s, which the
// model echoes and the router runs, and the model end s; a restore frame
// then puts call_s on s, which closes it, while call runs.
func runThenCloseS(t *testing.T, h *limitedRouter, call string) {
	t.Helper()
	send(t, h.conn, messages.StreamingToolCall("s", call, "record"), messages.ToolArgChunk("s", call, argsA),
		messages.ToolComplete("s", call))
	waitState(t, h.conn, "s", "completed")
	send(t, h.conn, messages.End("s")) // the model echoes it: s ends
	streamUntil(t, h.conn, "s", isEnd)
	restore, err := tools.RestoreFrame("z", "r1", restoredState("z", "s"))
	if err != nil {
		t.Fatal(err)
	}
	send(t, h.conn, restore)
	waitState(t, h.conn, "z", "restored") // s, which the consumer has no call open on, is closed
}

// TestDurableRouter_CallRunOnAnOpenStreamGoesOut: call_a runs on stream s,
// where the consumer was told it started and completed; the model then
// ends s, and a restore frame puts a call on s, which closes it, while
// call_a still runs. Its result comes while s is closed and its model
// echoes it only once the consumer has written on s again: the echo goes
// out, as that of any call of an open stream.
func TestDurableRouter_CallRunOnAnOpenStreamGoesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, release := startGated(t, holdModel)
		runThenCloseS(t, h, "call_a")

		close(release)
		if r := nextResult(t, h.got); r.GetToolCallId() != "call_a" || r.IsErrorResult() {
			t.Fatalf("the model got %s, want call_a's result", line(r))
		}
		send(t, h.conn, messages.Text("s", "release")) // the model echoes call_a's result, then the text
		if out := streamUntil(t, h.conn, "s", isText("release")); !slices.ContainsFunc(out, isResultOf("call_a")) {
			t.Errorf("stream s written on again got %q: want the echo of call_a's result, a call it was told of", lines(out))
		}
	})
}

// TestDurableRouter_EchoTwiceStaysIn: a model that echoes the result of
// a call ended at the limit on a closed stream twice, once the consumer
// has written there again, has neither echo go out: the consumer, told
// of no such call, gets no result of it. The model's new call of the same
// id there is the consumer's: its result goes out, both times.
func TestDurableRouter_EchoTwiceStaysIn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := endedAtTheLimit(t, twiceModel)

		releaseKeepsIn(t, h)
		newCallA(t, h)
		send(t, h.conn, messages.Text("s", "release"))
		out := streamUntil(t, h.conn, "s", isText("release"))
		if n := len(slices.DeleteFunc(out, func(f *messages.Frame) bool { return !isResultOf("call_a")(f) })); n != 2 {
			t.Errorf("stream s got %d echoes of the new call_a's result, want the model's two", n)
		}
	})
}

// TestDurableRouter_EchoBoundDropsTheEchoesThatCameFirst: a restart
// closes streams first, came and rest, with 1, 1 and 255 recovered calls;
// CANCELs end them, one stream after the other, and their results go to
// a model that holds them. The model echoes came's result before rest's
// calls are cancelled. Past the bound of 256 echoes expected, the router
// forgets came's, which came already (only the model's echo of it again
// would still be kept in), rather than first's, the oldest, whose echo
// has not come: when it comes, on first written on again, it does not go
// out.
func TestDurableRouter_EchoBoundDropsTheEchoesThatCameFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startLimitedWith(t, restartSupervised, time.Hour, func(chan<- *messages.Frame) actors.Spec { return echoHeld(nil, 1) })
		const rest = 255 // with first's and came's, one more than the bound
		calls := []*messages.Frame{messages.StreamingToolCall("first", "call_first", "record"),
			messages.StreamingToolCall("came", "call_came", "record")}
		for i := range rest {
			calls = append(calls, messages.StreamingToolCall("rest", fmt.Sprint("call_", i), "record"))
		}
		send(t, h.conn, calls...)
		waitState(t, h.conn, "rest", "started")
		h.restart("p") // first, came and rest closed

		send(t, h.conn, messages.Cancel("first", ""), messages.Cancel("came", ""))
		// The model echoes the CANCELs on the closed streams, where they
		// stay in, before came is written on again.
		synctest.Wait()
		send(t, h.conn, messages.Text("came", "release")) // the model echoes call_came's result: it came
		if out := streamUntil(t, h.conn, "came", isText("release")); len(out) != 1 {
			t.Fatalf("stream came written on again got %q, want the echo of its text alone", lines(out))
		}
		send(t, h.conn, messages.Cancel("rest", ""))
		synctest.Wait()
		send(t, h.conn, messages.Text("first", "release")) // the model echoes call_first's result
		if out := streamUntil(t, h.conn, "first", isText("release")); len(out) != 1 {
			t.Errorf("stream first written on again got %q, want the echo of its text alone", lines(out))
		}
	})
}

// TestDurableRouter_ReusedIDWithTheEchoedPayloadGoesOut: the model starts
// and completes call_m on a stream a restart closed, and echoes its
// result at once: the echo stays in. Once the consumer has written on the
// stream again, the model starts a new call_m there, whose result has
// the very payload of the old one's: it is the new call's, which the
// consumer was told of, and its echo goes out, though the old call's echo
// came (and would have been kept in, had it come again).
func TestDurableRouter_ReusedIDWithTheEchoedPayloadGoesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := recoveredOnS(t, startModel)
		send(t, h.conn, messages.Meta("s", "start", nil), messages.Meta("s", "finish", nil)) // call_m runs, closed
		first := results(t, h.got, 1)[0]
		if first.GetToolCallId() != "call_m" || first.IsErrorResult() {
			t.Fatalf("the model got %s, want call_m's result", line(first))
		}
		send(t, h.conn, messages.Text("s", "back"))
		if out := streamUntil(t, h.conn, "s", isText("back")); slices.ContainsFunc(out, isResultOf("call_m")) {
			t.Fatalf("stream s got %q: the consumer, told of no call_m there, got its result", lines(out))
		}

		send(t, h.conn, messages.Meta("s", "start", nil), messages.Meta("s", "finish", nil)) // a new call_m, open
		waitState(t, h.conn, "s", "completed")
		second := results(t, h.got, 1)[0]
		if second.GetToolCallId() != "call_m" || string(second.GetPayload()) != string(first.GetPayload()) {
			t.Fatalf("the new call_m's result %s, want the payload of the old one's, %s", line(second), first.GetPayload())
		}
		send(t, h.conn, messages.Text("s", "after"))
		if out := streamUntil(t, h.conn, "s", isText("after")); !slices.ContainsFunc(out, isResultOf("call_m")) {
			t.Errorf("stream s got %q: want the echo of the new call_m's result", lines(out))
		}
	})
}

// startHeldModel is startModel that holds the results written into it
// and echoes those of a stream on the consumer's TEXT "release" there,
// as holdModel does.
func startHeldModel(got chan<- *messages.Frame) actors.Spec {
	var held []*messages.Frame
	return actors.Duplex("model", func(f *messages.Frame, emit func(*messages.Frame)) {
		switch {
		case f.GetType() == messages.FrameType_TOOL_RESULT:
			got <- f
			held = append(held, f)
			return
		case f.GetType() == messages.FrameType_META && f.GetName() == "start":
			emit(messages.StreamingToolCall(f.GetStreamId(), "call_m", "record"))
			return
		case f.GetType() == messages.FrameType_TEXT && f.GetText() == "release":
			for _, r := range held {
				if r.GetStreamId() == f.GetStreamId() {
					emit(r)
				}
			}
			held = slices.DeleteFunc(held, func(r *messages.Frame) bool { return r.GetStreamId() == f.GetStreamId() })
		}
		emit(f)
	})
}

// TestDurableRouter_ReusedIDWhileTheCallRuns: call_m runs on stream s,
// where the consumer was told it started and completed; the model ends
// s, and a restore frame puts a call on s, which closes it, while call_m
// still runs. The model then starts a new call_m on the closed stream,
// which its END of s answers as invalid arguments: the consumer was told
// nothing of it. Whichever of the two is answered first, the echo of the
// running call_m's result goes out once the consumer has written on s
// again, and that of the new call_m's stays in: the router does not take
// the one call for the other.
func TestDurableRouter_ReusedIDWhileTheCallRuns(t *testing.T) {
	for _, runningFirst := range []bool{false, true} {
		t.Run(fmt.Sprint("running call answered first: ", runningFirst), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h, release := startGated(t, startHeldModel)
				runThenCloseS(t, h, "call_m")

				send(t, h.conn, messages.Meta("s", "start", nil)) // a new call_m, on the closed stream
				synctest.Wait()
				if runningFirst {
					close(release)
					if r := results(t, h.got, 1)[0]; r.GetToolCallId() != "call_m" || r.IsErrorResult() {
						t.Fatalf("the model got %s, want the running call_m's result", line(r))
					}
				}
				send(t, h.conn, messages.End("s")) // the model echoes it: call_s and the new call_m end
				if rs := results(t, h.got, 2); !slices.ContainsFunc(rs, func(f *messages.Frame) bool {
					return f.GetToolCallId() == "call_m" && tools.KindOf(f) == tools.FailureInvalidArguments
				}) {
					t.Fatalf("the model got %q, want the new call_m answered as invalid arguments", lines(rs))
				}
				if !runningFirst {
					close(release)
					if r := results(t, h.got, 1)[0]; r.GetToolCallId() != "call_m" || r.IsErrorResult() {
						t.Fatalf("the model got %s, want the running call_m's result", line(r))
					}
				}

				send(t, h.conn, messages.Text("s", "release")) // the model echoes the three results, then the text
				out := slices.DeleteFunc(streamUntil(t, h.conn, "s", isText("release")), func(f *messages.Frame) bool {
					return f.GetType() != messages.FrameType_TOOL_RESULT
				})
				if len(out) != 1 || out[0].GetToolCallId() != "call_m" || out[0].IsErrorResult() {
					t.Errorf("stream s written on again got the results %q, want the running call_m's alone", lines(out))
				}
			})
		})
	}
}
