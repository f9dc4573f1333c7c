package tools_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// bothRestarts runs body in a bubble with a router that its supervisor
// restarts, and with one whose runtime is closed and started again on
// the same store (memstore: bbolt stays out of bubbles, see
// TestDurableRouter_RecoveredCallsEndForGoodInAFile).
func bothRestarts(t *testing.T, body func(t *testing.T, kind restartKind)) {
	for _, kind := range []restartKind{restartSupervised, restartRuntime} {
		name := "supervised restart"
		if kind == restartRuntime {
			name = "runtime restart"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { body(t, kind) })
		})
	}
}

// results takes the n TOOL_RESULTs the model has got, once the bubble is
// idle, and fails if it got another number.
func results(t *testing.T, got chan *messages.Frame, n int) []*messages.Frame {
	t.Helper()
	synctest.Wait()
	var out []*messages.Frame
	for len(got) > 0 {
		out = append(out, <-got)
	}
	if len(out) != n {
		t.Fatalf("the model got %q, want %d results", lines(out), n)
	}
	return out
}

// TestDurableRouter_RecoveredLimitMeetsTheReopen: the consumer writes on
// the closed stream of a recovered call at the very moment its limit
// passes. Whichever comes first, the call is either announced (and goes
// on) or ended, never both, and it gets one result in all: ended at the
// limit, or at its stream's END.
func TestDurableRouter_RecoveredLimitMeetsTheReopen(t *testing.T) {
	bothRestarts(t, func(t *testing.T, kind restartKind) {
		h := startLimited(t, kind, time.Hour)
		send(t, h.conn, messages.StreamingToolCall("s", "call_a", "record"), messages.ToolArgChunk("s", "call_a", argsA[:9]))
		waitState(t, h.conn, "s", "started")
		h.restart("p")

		time.Sleep(h.limit)
		send(t, h.conn, messages.Text("s", "back"))
		out := streamUntil(t, h.conn, "s", isText("back"))
		announced := slices.ContainsFunc(out, func(f *messages.Frame) bool { return isState(f, "recovered") })
		synctest.Wait()
		ended := len(h.got)
		if announced == (ended == 1) {
			t.Errorf("announced %v, results at the limit %d: want one or the other (%q)", announced, ended, lines(out))
		}
		send(t, h.conn, messages.End("s"))
		streamUntil(t, h.conn, "s", isEnd)
		for _, r := range results(t, h.got, 1) {
			if r.GetToolCallId() != "call_a" || !r.IsErrorResult() {
				t.Errorf("result %s, want call_a's error result", line(r))
			}
		}
	})
}

// TestDurableRouter_SecondRestartKeepsTheLimit: a restart in the middle
// of the limit, with one closed stream written on again and one not,
// closes both again. The call of the one not written on ends at the limit
// from the first recovery, which closed its stream (the second does not
// put it off); those of the one written on again, whose consumer came
// back, and the probe's call, which the first restart did not recover,
// wait the whole limit from the second recovery. Each is ended once, for
// good.
func TestDurableRouter_SecondRestartKeepsTheLimit(t *testing.T) {
	bothRestarts(t, func(t *testing.T, kind restartKind) {
		h := startLimited(t, kind, time.Hour)
		send(t, h.conn, messages.StreamingToolCall("s", "call_a", "record"), messages.ToolArgChunk("s", "call_a", argsA[:9]))
		send(t, h.conn, messages.StreamingToolCall("k", "call_k", "record"))
		waitState(t, h.conn, "k", "started")
		h.restart("p")

		time.Sleep(h.limit / 2)
		send(t, h.conn, messages.Text("s", "back"))
		if out := streamUntil(t, h.conn, "s", isText("back")); !slices.ContainsFunc(out, func(f *messages.Frame) bool { return isState(f, "recovered") }) {
			t.Errorf("stream s written on again: %q, no recovered state frame", lines(out))
		}
		if seen := h.restart("p2"); kind == restartSupervised { // a new process has a new consumer
			closedOnce(t, seen, "s") // open again, closed again; k stayed closed
		}
		time.Sleep(h.limit/2 + time.Second)
		if r := results(t, h.got, 1)[0]; r.GetToolCallId() != "call_k" || tools.KindOf(r) != tools.FailureStopped {
			t.Errorf("result an hour after the first recovery: %s, want call_k stopped", line(r))
		}
		time.Sleep(h.limit/2 - 2*time.Second)
		results(t, h.got, 0)
		time.Sleep(2 * time.Second)
		var ids []string
		for _, r := range results(t, h.got, 2) {
			if tools.KindOf(r) != tools.FailureStopped {
				t.Errorf("result %s, want stopped", line(r))
			}
			ids = append(ids, r.GetToolCallId())
		}
		if slices.Sort(ids); !slices.Equal(ids, []string{"call_a", "call_p"}) {
			t.Errorf("ended %q an hour after the second recovery, want call_a and call_p", ids)
		}
		h.restart("p3")
		notRecovered(t, h.conn, "s")
		notRecovered(t, h.conn, "k")
		results(t, h.got, 0)
	})
}

// restoredState is a RouterState with one call of record per stream,
// call_<stream>, its arguments begun.
func restoredState(streams ...string) *messages.RouterState {
	st := &messages.RouterState{}
	for i, s := range streams {
		st.Calls = append(st.Calls, &messages.PendingToolCall{Seq: uint64(i + 1), StreamId: s,
			ToolCallId: "call_" + s, Name: "record", Args: []byte(`{"id":"` + s + `",`)})
	}
	return st
}

// TestDurableRouter_RestoredCallsOnUnopenedStreams: a restore frame's
// calls on the stream it came on and on the streams the consumer has a
// call open on are announced at once ("restored"); those on the other
// streams are kept as a restart keeps the calls it recovers: nothing goes
// out on their streams until the consumer writes on them (then they are
// announced, first), and those of a stream not written on within
// RecoveredTimeout of the restore are ended, for good.
func TestDurableRouter_RestoredCallsOnUnopenedStreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startLimited(t, restartSupervised, time.Hour)
		send(t, h.conn, messages.Text("o", "hi"))
		streamUntil(t, h.conn, "o", isText("hi"))
		restore, err := tools.RestoreFrame("x", "r1", restoredState("x", "o", "u", "v"))
		if err != nil {
			t.Fatal(err)
		}
		send(t, h.conn, restore)
		for _, s := range []string{"x", "o"} {
			if ev, _ := waitState(t, h.conn, s, "restored"); !slices.Equal(ev.ToolCallIDs, []string{"call_" + s}) {
				t.Errorf("restored on %s: %+v", s, ev)
			}
		}
		seen := probe(t, h.conn, "p")
		if got := append(onStream(seen, "u"), onStream(seen, "v")...); len(got) != 0 {
			t.Errorf("streams the consumer had not opened got %q", lines(got))
		}
		send(t, h.conn, messages.Text("v", "back"))
		ev, before := waitState(t, h.conn, "v", "restored")
		if !slices.Equal(ev.ToolCallIDs, []string{"call_v"}) || len(onStream(before, "v")) != 0 {
			t.Errorf("restored on v once written on: %+v after %q", ev, lines(onStream(before, "v")))
		}

		time.Sleep(h.limit - time.Second)
		results(t, h.got, 0)
		time.Sleep(2 * time.Second)
		r := results(t, h.got, 1)[0]
		if r.GetToolCallId() != "call_u" || tools.KindOf(r) != tools.FailureStopped ||
			!strings.Contains(string(r.GetPayload()), "restore frame") {
			t.Errorf("result at the limit: %s, want call_u stopped, saying why", line(r))
		}
		if got := onStream(probe(t, h.conn, "q"), "u"); len(got) != 0 {
			t.Errorf("the closed stream u got %q", lines(got))
		}
		h.restart("p2")
		notRecovered(t, h.conn, "u")
		results(t, h.got, 0)
	})
}

// TestDurableRouter_RestoreOnAClosedStreamRestartsItsLimit: calls a
// restore frame puts on a stream a restart closed wait the whole limit
// from the restore, not what was left of the recovery's.
func TestDurableRouter_RestoreOnAClosedStreamRestartsItsLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startLimited(t, restartSupervised, time.Hour)
		send(t, h.conn, messages.StreamingToolCall("s", "call_a", "record"))
		waitState(t, h.conn, "s", "started")
		h.restart("p")
		time.Sleep(h.limit / 2)
		restore, err := tools.RestoreFrame("x", "r1", restoredState("s"))
		if err != nil {
			t.Fatal(err)
		}
		send(t, h.conn, restore)
		time.Sleep(h.limit/2 + time.Second)
		results(t, h.got, 0)
		time.Sleep(h.limit / 2)
		if r := results(t, h.got, 1)[0]; r.GetToolCallId() != "call_s" || tools.KindOf(r) != tools.FailureStopped {
			t.Errorf("result %s, want call_s stopped", line(r))
		}
	})
}

// TestDurableRouter_StreamsLeftOpenAreBounded: a model that never ends
// its streams, but the consumer's calls there by their ids, leaves open
// every stream the consumer writes on, quiet (frames of no id beside
// calls the model ended). The router remembers no more than the 1024 of
// them opened last, and the streams with a call of the consumer's open
// (as the runtime does): a restore frame's call on the first of 1300
// quiet streams is kept as on a stream the consumer has no call open on
// (announced, and never lost, once the consumer writes there again),
// while those on a recent one, on the stream of the consumer's call
// (pending) and on a stream written on before them all whose call of no
// id (a prompt) is open are announced at once.
func TestDurableRouter_StreamsLeftOpenAreBounded(t *testing.T) {
	h := startLimited(t, restartSupervised, time.Hour)
	send(t, h.conn, messages.StreamingToolCall("busy", "call_busy", "record"), messages.Text("prompt", "hi"))
	waitState(t, h.conn, "busy", "started")
	const n = 1300
	stream := func(i int) string { return fmt.Sprintf("o%d", i) }
	// In rounds, each written once the model ended x on the streams of
	// the round before: they are quiet when the router prunes.
	const round = 100
	for r := 0; r < n; r += round {
		frames := make([]*messages.Frame, 0, 3*round)
		for i := r; i < r+round; i++ {
			// The model echoes them: its END of x alone leaves the stream
			// open for the frames of no id, and no END of the stream comes.
			frames = append(frames, messages.Text(stream(i), "hi"), withCall(messages.Text(stream(i), "x"), "x"),
				withCall(messages.End(stream(i)), "x"))
		}
		send(t, h.conn, frames...)
		streamUntil(t, h.conn, stream(r+round-1), isEnd)
	}
	first, last := stream(0), stream(n-1)
	restore, err := tools.RestoreFrame("x", "r1", restoredState("x", "busy", "prompt", first, last))
	if err != nil {
		t.Fatal(err)
	}
	send(t, h.conn, restore)
	var seen []*messages.Frame
	for _, s := range []string{"x", "busy", "prompt", last} {
		ev, before := waitState(t, h.conn, s, "restored")
		if !slices.Equal(ev.ToolCallIDs, []string{"call_" + s}) {
			t.Errorf("restored on %s: %+v", s, ev)
		}
		seen = append(seen, before...)
	}
	seen = append(seen, probe(t, h.conn, "p")...)
	if slices.ContainsFunc(onStream(seen, first), func(f *messages.Frame) bool { return isState(f, "restored") }) {
		t.Errorf("the restore's call on %s, the first of %d quiet streams, was announced at once", first, n)
	}
	send(t, h.conn, messages.Text(first, "back"))
	if ev, _ := waitState(t, h.conn, first, "restored"); !slices.Equal(ev.ToolCallIDs, []string{"call_" + first}) {
		t.Errorf("restored on %s once written on: %+v", first, ev)
	}
}
