package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
	"github.com/polyweave/polyweave-go/tools"
)

// TestTool_DescribeOnAStreamWithACallRunning: a DESCRIBE of no id on
// the stream of a call still running is answered with its DESCRIPTION at
// once and its END once no call runs on the stream: an END of no id ends
// the stream, and every call on it, in the runtime's view. The call
// still gets its one result, with the END of its id, when the tool actor
// stops with it running, and the DESCRIBE's END follows it.
func TestTool_DescribeOnAStreamWithACallRunning(t *testing.T) {
	started := make(chan struct{})
	slow := tools.MustNew(tools.Definition{Name: "slow", Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}})
	rt := newRuntime(t)
	conn := start(t, rt, slow.Spec())
	send(t, conn, messages.ToolCall("s", "c1", "slow", json.RawMessage(`{}`)))
	<-started
	send(t, conn, messages.Describe("s"))
	f, err := conn.Recv(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if f.GetType() != messages.FrameType_DESCRIPTION || f.GetStreamId() != "s" {
		t.Fatalf("DESCRIBE answered first with %q, want its DESCRIPTION", lines([]*messages.Frame{f}))
	}
	rest := closeFor(t, conn, "s")
	if len(rest) != 3 || rest[0].GetType() != messages.FrameType_TOOL_RESULT || rest[0].GetToolCallId() != "c1" ||
		tools.KindOf(rest[0]) != tools.FailureStopped || rest[1].GetType() != messages.FrameType_END ||
		rest[1].GetToolCallId() != "c1" || rest[2].GetType() != messages.FrameType_END || rest[2].GetToolCallId() != "" {
		t.Errorf("after the stop, stream s got %q, want c1's stopped result, its END and the DESCRIBE's END", lines(rest))
	}
}

// closeFor stops the duplex of conn and returns the frames on stream that
// it emitted before it stopped and that were not read yet.
func closeFor(t *testing.T, conn *actors.Conn, stream string) []*messages.Frame {
	t.Helper()
	if err := conn.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	var out []*messages.Frame
	for {
		f, err := conn.Recv(testCtx(t))
		if err != nil {
			if !errors.Is(err, actors.ErrDuplexStopped) {
				t.Fatal(err)
			}
			return out
		}
		if f.GetStreamId() == stream {
			out = append(out, f)
		}
	}
}

// failsOnBoom is a tool's Logic that fails on a META named "boom": it
// stands in for whatever, in a frame of a call, fails the tool actor. The
// rest goes to the tool's Logic, its failure handler included.
type failsOnBoom struct{ actors.Logic }

func (l failsOnBoom) Receive(c actors.Context, msg any) {
	if f, ok := msg.(*messages.Frame); ok && f.GetType() == messages.FrameType_META && f.GetName() == "boom" {
		panic("boom")
	}
	l.Logic.Receive(c, msg)
}

func (l failsOnBoom) OnFailure(c actors.Context, err error) {
	l.Logic.(actors.FailureHandler).OnFailure(c, err)
}

// TestTool_DescribeLeavesTheRuntimeTheCall: a DESCRIBE, with a tool-call
// id or without, on the stream of a call still running, leaves the
// runtime, which tracks a stream's calls by their ids, the running call
// open on the stream: one with an id of its own is answered with an END
// of its id at once, one without is answered with its END only once no
// call runs on the stream, and one with the running call's id (a frame
// of that call, for the runtime) with its DESCRIPTION alone, the call's
// END to come with its answer. So a frame of that call that fails the
// tool actor, resumed by its supervisor, has the runtime answer the
// call, once (ERROR and END of its id), and stop its work; what the tool
// then emits of the call is dropped.
func TestTool_DescribeLeavesTheRuntimeTheCall(t *testing.T) {
	for _, id := range []string{"d1", "", "c1"} {
		t.Run("id="+id, func(t *testing.T) { describeThenFailTheCall(t, id) })
	}
}

// startResumedCall starts the tool "slow", which fails on a META named
// boom (see failsOnBoom) and is resumed by its supervisor, and has its
// call c1 on stream s running. stopped is closed once c1's work stops.
func startResumedCall(t *testing.T) (conn *actors.Conn, stopped chan struct{}) {
	t.Helper()
	started, stopped := make(chan struct{}), make(chan struct{})
	slow := tools.MustNew(tools.Definition{Name: "slow", Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
		close(started)
		<-ctx.Done()
		close(stopped)
		return nil, ctx.Err()
	}})
	rt := actorstest.NewRuntime(t, &actors.RuntimeOptions{Supervision: supervisor.MustNew(&supervisor.Options{
		Decider: func(error) supervisor.Directive { return supervisor.Resume }})})
	spec := slow.Spec()
	spec.New = func() actors.Logic { return failsOnBoom{slow.Logic()} }
	conn = start(t, rt, spec)
	send(t, conn, messages.ToolCall("s", "c1", "slow", json.RawMessage(`{}`)))
	<-started
	return conn, stopped
}

// describeThenFailTheCall runs TestTool_DescribeLeavesTheRuntimeTheCall
// with a DESCRIBE of tool-call id id.
func describeThenFailTheCall(t *testing.T, id string) {
	conn, stopped := startResumedCall(t)
	describe := messages.Describe("s")
	describe.ToolCallId = id
	send(t, conn, describe)
	want := 2 // DESCRIPTION and the END of id
	if id == "" || id == "c1" {
		want = 1 // DESCRIPTION; its END comes once c1 has its answer, or is c1's
	}
	var got []*messages.Frame
	for len(got) < want {
		f, err := conn.Recv(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, f)
	}
	if got[0].GetType() != messages.FrameType_DESCRIPTION || got[0].GetStreamId() != "s" ||
		want == 2 && (got[1].GetType() != messages.FrameType_END || got[1].GetToolCallId() != id) {
		t.Fatalf("DESCRIBE %q answered with %q, want DESCRIPTION (and the END of its id, if it has one of its own)", id, lines(got))
	}

	boom := messages.Meta("s", "boom", nil)
	boom.ToolCallId = "c1"
	send(t, conn, boom)
	// A DESCRIBE on another stream: its answer comes after what the
	// Resume emitted.
	probe := messages.Describe("p")
	probe.ToolCallId = "d2"
	send(t, conn, probe)
	if _, err := conn.RecvStream(testCtx(t), "p"); err != nil {
		t.Fatal(err)
	}
	select { // the Resume's CANCEL of c1 came before the probe
	case <-stopped:
	case <-testCtx(t).Done():
		t.Error("the Resume did not stop c1's work")
	}
	rest := closeFor(t, conn, "s") // what came on s after the DESCRIBE, the stop's included
	wantRest := 2
	if id == "" {
		wantRest = 3 // and the DESCRIBE's END, once c1 ended
	}
	if len(rest) != wantRest || rest[0].GetType() != messages.FrameType_ERROR || rest[0].GetToolCallId() != "c1" ||
		rest[0].GetMeta().GetFailureKind() != actors.FailedKind ||
		rest[1].GetType() != messages.FrameType_END || rest[1].GetToolCallId() != "c1" ||
		id == "" && (rest[2].GetType() != messages.FrameType_END || rest[2].GetToolCallId() != "") {
		t.Errorf("after c1's frame failed the tool, stream s got %q, want c1's ERROR (failed) and END alone "+
			"(then the END of the DESCRIBE of no id)", lines(rest))
	}
}
