package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// TestCallRunner: calls written into a call runner, each on a stream of
// its own, get exactly one TOOL_RESULT each, as a router gives them: run
// inline (Sync) or on the tool's actor, unknown tools and invalid
// arguments answered with error results, a CANCEL answering the running
// call of its stream; other frames are dropped.
func TestCallRunner(t *testing.T) {
	rt := newRuntime(t)
	greetTool := tools.MustNewTyped(tools.Definition{Name: "greet", Sync: true}, func(_ context.Context, in greetIn) (string, error) {
		return "Hello, " + in.Name, nil
	})
	started := make(chan struct{})
	slow := tools.MustNew(tools.Definition{Name: "slow", Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}})
	spec, err := tools.NewCallRunner(&tools.RouterOptions{Tools: []*tools.Tool{greetTool, slow}})
	if err != nil {
		t.Fatal(err)
	}
	mux, err := rt.StartMux(spec)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	open := func(id string) *actors.MuxStream {
		s, err := mux.Open(id)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	calls := []struct {
		stream, tool, args, want string
	}{
		{"a", "greet", `{"name":"Ada"}`, `TOOL_RESULT stream=a id=a name=greet payload="Hello, Ada"`},
		{"b", "nope", `{}`, `TOOL_RESULT stream=b id=b name=nope is_error failure_kind=unknown_tool payload={"success":false,"error":"Unknown tool: nope"}`},
		{"c", "greet", `{"name":1}`, ""}, // invalid arguments, worded by the validator
	}
	streams := map[string]*actors.MuxStream{}
	for _, c := range calls {
		s := open(c.stream)
		streams[c.stream] = s
		// A frame that is not a call is dropped: the call's result comes first.
		if err := s.SendAll(messages.Text(c.stream, "not a call"), messages.ToolCall(c.stream, c.stream, c.tool, raw(c.args))); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range calls {
		f, err := streams[c.stream].Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case c.want != "" && line(f) != c.want:
			t.Errorf("stream %s: got %s, want %s", c.stream, line(f), c.want)
		case c.want == "" && tools.KindOf(f) != tools.FailureInvalidArguments:
			t.Errorf("stream %s: got %s, want an invalid_arguments result", c.stream, line(f))
		}
	}
	d := open("d")
	streams["d"] = d
	if err := d.Send(messages.ToolCall("d", "d", "slow", raw(`{}`))); err != nil {
		t.Fatal(err)
	}
	<-started
	if err := d.Send(messages.Cancel("d", "d")); err != nil {
		t.Fatal(err)
	}
	f, err := d.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if f.GetType() != messages.FrameType_TOOL_RESULT || tools.KindOf(f) != tools.FailureCancelled {
		t.Errorf("cancelled call: got %s", line(f))
	}
	// One result per call: once the runner is gone, what is queued after
	// each result is the stream's closing (ERROR and END), no result.
	if err := mux.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for id, s := range streams {
		for {
			f, err := s.Recv(ctx)
			if errors.Is(err, actors.ErrDuplexStopped) {
				break
			}
			if err != nil || f.GetType() == messages.FrameType_TOOL_RESULT {
				t.Errorf("stream %s after its result: %s, %v", id, line(f), err)
				break
			}
		}
	}
}

// TestCallRunner_FailureAnswersRunningCalls: when the runner fails, the
// calls running on tool actors get error results, since the restarted
// runner knows none of them.
func TestCallRunner_FailureAnswersRunningCalls(t *testing.T) {
	slow := tools.MustNew(tools.Definition{Name: "slow", Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}})
	spec, err := tools.NewCallRunner(&tools.RouterOptions{Tools: []*tools.Tool{slow}})
	if err != nil {
		t.Fatal(err)
	}
	var r actorstest.Recorder
	l := spec.New()
	for _, msg := range []any{actors.Started{}, messages.ToolCall("s", "c1", "slow", raw(`{}`))} {
		if err := r.Deliver(l, msg); err != nil {
			t.Fatal(err)
		}
	}
	if len(r.Sent) != 1 || r.Sent[0].Frame.GetToolCallId() != "c1" || len(r.Emitted) != 0 {
		t.Fatalf("the call went to %d actors, %d frames emitted", len(r.Sent), len(r.Emitted))
	}
	l.(actors.FailureHandler).OnFailure(&r, errors.New("boom"))
	if len(r.Emitted) != 1 || tools.KindOf(r.Emitted[0]) != tools.FailureStopped || r.Emitted[0].GetToolCallId() != "c1" {
		t.Fatalf("after the failure: %q, want one stopped result for c1", lines(r.Emitted))
	}
	// The tool's own late answer is not delivered a second time.
	late := actors.ChildFrame{Child: r.Sent[0].To, Frame: messages.RawToolResult("s", "c1", "slow", raw(`{}`))}
	if err := r.Deliver(l, late); err != nil {
		t.Fatal(err)
	}
	if len(r.Emitted) != 1 {
		t.Errorf("a late result went out again: %q", lines(r.Emitted))
	}
}

func TestCallRunner_RejectsDurability(t *testing.T) {
	_, err := tools.NewCallRunner(&tools.RouterOptions{Durability: &tools.DurabilityOptions{}})
	if err == nil {
		t.Fatal("a call runner took durability options")
	}
}

// drain closes conn and returns every frame it emitted that was not read
// yet, the closing ones included.
func drain(t *testing.T, conn *actors.Conn) []*messages.Frame {
	t.Helper()
	ctx := testCtx(t)
	if err := conn.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var out []*messages.Frame
	for {
		f, err := conn.Recv(ctx)
		if errors.Is(err, actors.ErrDuplexStopped) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
}

// untilResult reads conn until the TOOL_RESULT of stream and returns what
// it read, that result last.
func untilResult(t *testing.T, conn *actors.Conn, stream string) []*messages.Frame {
	t.Helper()
	ctx := testCtx(t)
	var out []*messages.Frame
	for {
		f, err := conn.Recv(ctx)
		if err != nil {
			t.Fatalf("waiting for the result on %s (read %q): %v", stream, lines(out), err)
		}
		out = append(out, f)
		if f.GetType() == messages.FrameType_TOOL_RESULT && f.GetStreamId() == stream {
			return out
		}
	}
}

// TestCallRunner_FailureAnswersStreamingCalls: a streaming call whose
// arguments are still arriving when the runner fails gets its one error
// result then, and the rest of it reaching the restarted runner (chunks,
// with or without its completion) gets no second one, and leaves no
// stream open: the restarted runner closes the stream those frames open
// again, so that a caller that stops sending them is not left waiting for
// END, and the runner keeps nothing of the stream.
func TestCallRunner_FailureAnswersStreamingCalls(t *testing.T) {
	for _, tc := range []struct {
		name string
		rest []*messages.Frame // what of c1 reaches the restarted runner
	}{
		{"chunk and completion", []*messages.Frame{messages.ToolArgChunk("s", "c1", "}"), messages.ToolComplete("s", "c1")}},
		{"chunk", []*messages.Frame{messages.ToolArgChunk("s", "c1", "}")}},
		{"chunks", []*messages.Frame{messages.ToolArgChunk("s", "c1", `"a":`), messages.ToolArgChunk("s", "c1", "1}")}},
	} {
		t.Run(tc.name, func(t *testing.T) { failMidAssembly(t, tc.rest) })
	}
}

// startSlowPingRunner starts on rt a call runner of two tools: "slow",
// which sends to ran as it runs, and "ping", a Sync tool that answers
// "pong". A ping call is how the tests see that the runner has taken the
// frames written before it.
func startSlowPingRunner(t *testing.T, rt *actors.Runtime) (conn *actors.Conn, ran <-chan struct{}) {
	t.Helper()
	runs := make(chan struct{}, 1)
	slow := tools.MustNew(tools.Definition{Name: "slow", Handler: func(context.Context, json.RawMessage) (any, error) {
		runs <- struct{}{}
		return "ran", nil
	}})
	ping := tools.MustNew(tools.Definition{Name: "ping", Sync: true, Handler: func(context.Context, json.RawMessage) (any, error) {
		return "pong", nil
	}})
	spec, err := tools.NewCallRunner(&tools.RouterOptions{Tools: []*tools.Tool{slow, ping}})
	if err != nil {
		t.Fatal(err)
	}
	return start(t, rt, spec), runs
}

// failMidAssembly fails a call runner while the streaming call c1 on
// stream s is assembling, then sends rest to the restarted runner.
func failMidAssembly(t *testing.T, rest []*messages.Frame) {
	rt := newRuntime(t)
	conn, ran := startSlowPingRunner(t, rt)
	if err := conn.SendAll(messages.StreamingToolCall("s", "c1", "slow"), messages.ToolArgChunk("s", "c1", "{"),
		messages.ToolCall("m0", "m0", "ping", nil)); err != nil {
		t.Fatal(err)
	}
	got := untilResult(t, conn, "m0") // the runner is up and has taken the frames of s
	if err := rt.InjectPanic(actorID(t, rt, "tool-runner"), "injected by the test"); err != nil {
		t.Fatal(err)
	}
	if err := conn.SendAll(append(rest, messages.ToolCall("m", "m", "ping", nil))...); err != nil {
		t.Fatal(err)
	}
	got = append(got, untilResult(t, conn, "m")...) // the restarted runner has taken every frame of s
	got = append(got, drain(t, conn)...)
	var results []*messages.Frame
	for _, f := range got {
		if f.GetStreamId() != "s" {
			continue
		}
		switch f.GetType() {
		case messages.FrameType_TOOL_RESULT:
			results = append(results, f)
		case messages.FrameType_ERROR, messages.FrameType_END:
		default:
			t.Errorf("on s: %s", line(f))
		}
	}
	if len(results) != 1 || tools.KindOf(results[0]) != tools.FailureStopped || results[0].GetToolCallId() != "c1" {
		t.Fatalf("results of c1: %q, want one stopped result; all frames: %q", lines(results), lines(got))
	}
	// The restarted runner closed s, which it took orphan frames on: the
	// runner's stop closes nothing of it.
	for _, f := range drainTail(got) {
		if f.GetStreamId() == "s" {
			t.Errorf("s still open in the restarted runner: %q", lines(got))
			break
		}
	}
	select {
	case <-ran:
		t.Error("the call ran after its stopped result")
	default:
	}
}

// drainTail is the frames after the last TOOL_RESULT of stream m.
func drainTail(got []*messages.Frame) []*messages.Frame {
	for i := len(got) - 1; i >= 0; i-- {
		if got[i].GetType() == messages.FrameType_TOOL_RESULT && got[i].GetStreamId() == "m" {
			return got[i+1:]
		}
	}
	return got
}

// TestCallRunner_ClosesAnsweredStreams: the runner closes a call's stream
// with END once its result is out and nothing else of the stream runs, so
// that a long-lived runner keeps no state per call it has answered: after
// many calls, its stop closes no stream.
func TestCallRunner_ClosesAnsweredStreams(t *testing.T) {
	rt := newRuntime(t)
	ping := tools.MustNew(tools.Definition{Name: "ping", Sync: true, Handler: func(context.Context, json.RawMessage) (any, error) {
		return "pong", nil
	}})
	echo := tools.MustNew(tools.Definition{Name: "echo", Handler: func(_ context.Context, args json.RawMessage) (any, error) {
		return args, nil
	}})
	spec, err := tools.NewCallRunner(&tools.RouterOptions{Tools: []*tools.Tool{ping, echo}})
	if err != nil {
		t.Fatal(err)
	}
	conn := start(t, rt, spec)
	const calls = 1000
	for i := range calls {
		id := fmt.Sprint("c", i)
		name := "ping"
		if i%2 == 1 {
			name = "echo"
		}
		if err := conn.Send(messages.ToolCall(id, id, name, raw(`{}`))); err != nil {
			t.Fatal(err)
		}
	}
	// Two calls on one stream: END once both are answered, not before.
	if err := conn.SendAll(messages.ToolCall("two", "a", "echo", raw(`{}`)), messages.ToolCall("two", "b", "echo", raw(`{}`))); err != nil {
		t.Fatal(err)
	}
	// A frame that is no call, then the caller's END: closed, no result.
	if err := conn.SendAll(messages.Text("stray", "not a call"), messages.End("stray")); err != nil {
		t.Fatal(err)
	}
	wantResults := func(stream string) int {
		switch stream {
		case "two":
			return 2
		case "stray":
			return 0
		}
		return 1
	}
	ctx := testCtx(t)
	results, ends := map[string]int{}, map[string]int{}
	var errs []*messages.Frame
	see := func(f *messages.Frame) {
		id := f.GetStreamId()
		switch f.GetType() {
		case messages.FrameType_TOOL_RESULT:
			if ends[id] != 0 {
				t.Errorf("a result on %s after its END", id)
			}
			results[id]++
		case messages.FrameType_END:
			if want := wantResults(id); results[id] != want {
				t.Errorf("END on %s after %d results, want %d", id, results[id], want)
			}
			ends[id]++
		case messages.FrameType_ERROR:
			errs = append(errs, f)
		default:
			t.Errorf("unexpected %s", line(f))
		}
	}
	for n := 0; n < calls+2; {
		f, err := conn.Recv(ctx)
		if err != nil {
			t.Fatalf("after %d results: %v", n, err)
		}
		if f.GetType() == messages.FrameType_TOOL_RESULT {
			n++
		}
		see(f)
	}
	// Every call is answered: what the runner's stop adds must close no
	// stream it still held open.
	for _, f := range drain(t, conn) {
		see(f)
	}
	if len(errs) != 0 {
		t.Errorf("the runner's stop closed %d streams it held open, e.g. %s", len(errs), line(errs[0]))
	}
	for id, n := range results {
		if n != wantResults(id) || ends[id] != 1 {
			t.Errorf("stream %s: %d results, %d ends", id, n, ends[id])
		}
	}
	if len(results) != calls+1 || ends["stray"] != 1 {
		t.Errorf("%d streams answered, want %d; %d ENDs on the stream without a call, want 1", len(results), calls+1, ends["stray"])
	}
}

// actorID is the id of the runtime's live duplex named name.
func actorID(t *testing.T, rt *actors.Runtime, name string) string {
	t.Helper()
	for _, a := range rt.Actors() {
		if a.Name == name {
			return a.ID
		}
	}
	t.Fatalf("no actor named %q in %+v", name, rt.Actors())
	return ""
}

// TestCallRunner_EndAfterEveryRejection: the caller's END on a stream
// with two calls still receiving their arguments rejects both, and the
// runner's END on the stream comes after both results, once: closing it
// at the first rejection put END between them, and the second result
// then opened the stream again.
func TestCallRunner_EndAfterEveryRejection(t *testing.T) {
	rt := newRuntime(t)
	echo := tools.MustNew(tools.Definition{Name: "echo", Handler: func(_ context.Context, args json.RawMessage) (any, error) {
		return args, nil
	}})
	spec, err := tools.NewCallRunner(&tools.RouterOptions{Tools: []*tools.Tool{echo}})
	if err != nil {
		t.Fatal(err)
	}
	conn := start(t, rt, spec)
	if err := conn.SendAll(messages.StreamingToolCall("s", "a", "echo"), messages.StreamingToolCall("s", "b", "echo"),
		messages.End("s")); err != nil {
		t.Fatal(err)
	}
	got, err := conn.RecvStream(testCtx(t), "s")
	if err != nil {
		t.Fatalf("stream s: %v (so far %q)", err, lines(got))
	}
	var kinds []string
	for _, f := range got {
		kinds = append(kinds, f.GetType().String()+" "+f.GetToolCallId())
	}
	if len(got) != 3 || got[0].GetType() != messages.FrameType_TOOL_RESULT || got[1].GetType() != messages.FrameType_TOOL_RESULT ||
		got[2].GetType() != messages.FrameType_END {
		t.Fatalf("stream s: %q, want the two calls' results, then END", kinds)
	}
	// The stream is closed: the runner's stop has nothing to close.
	for _, f := range drain(t, conn) {
		if f.GetStreamId() == "s" {
			t.Errorf("after END: %s", line(f))
		}
	}
}

// TestCallRunner_PanickingOnChangeLosesNoCall: a breaker's OnChange that
// panics when a failure opens the breaker fails the runner, but the
// failed call that opened it has its result already: it goes out before
// the host's hook is told.
func TestCallRunner_PanickingOnChangeLosesNoCall(t *testing.T) {
	rt := newRuntime(t)
	fails := tools.MustNew(tools.Definition{Name: "fails", Sync: true, Handler: func(context.Context, json.RawMessage) (any, error) {
		return nil, errors.New("broken")
	}})
	spec, err := tools.NewCallRunner(&tools.RouterOptions{Tools: []*tools.Tool{fails},
		Breaker: tools.BreakerOptions{Failures: 1, OnChange: func(string, tools.BreakerState) { panic("hook") }}})
	if err != nil {
		t.Fatal(err)
	}
	conn := start(t, rt, spec)
	if err := conn.Send(messages.ToolCall("s", "c1", "fails", raw(`{}`))); err != nil {
		t.Fatal(err)
	}
	got, err := conn.RecvStream(testCtx(t), "s")
	if err != nil {
		t.Fatalf("stream s: %v (so far %q)", err, lines(got))
	}
	results := 0
	for _, f := range got {
		if f.GetType() == messages.FrameType_TOOL_RESULT && f.GetToolCallId() == "c1" {
			results++
			if tools.KindOf(f) == "" {
				t.Errorf("c1's result is a success: %s", line(f))
			}
		}
	}
	if results != 1 {
		t.Fatalf("c1 has %d results, want 1: %q", results, lines(got))
	}
}
