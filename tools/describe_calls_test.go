package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// TestTool_DescribeOnAStreamWithACallRunning: a DESCRIBE on the stream of
// a call still running is answered (DESCRIPTION, END) at once, and the
// call still gets its one result, with the END of its id, when the tool
// actor stops with it running: the DESCRIBE's END, which ends the stream
// in the runtime's view, answers none of its calls; the tool answers each
// itself.
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
	got, err := conn.RecvStream(testCtx(t), "s")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"DESCRIPTION", "END"}; len(got) != 2 || got[0].GetType().String() != want[0] {
		t.Fatalf("DESCRIBE answered with %q, want DESCRIPTION and END", lines(got))
	}
	if err := conn.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	var rest []*messages.Frame
	for {
		f, err := conn.Recv(testCtx(t))
		if err != nil {
			if !errors.Is(err, actors.ErrDuplexStopped) {
				t.Fatal(err)
			}
			break
		}
		rest = append(rest, f)
	}
	if len(rest) != 2 || rest[0].GetType() != messages.FrameType_TOOL_RESULT || rest[0].GetToolCallId() != "c1" ||
		tools.KindOf(rest[0]) != tools.FailureStopped || rest[1].GetType() != messages.FrameType_END ||
		rest[1].GetToolCallId() != "c1" {
		t.Errorf("after the stop, stream s got %q, want c1's stopped result and its END", lines(rest))
	}
}
