package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// TestTool_EachDescribeOfABusyStreamGetsItsEnd: a tool answers each
// DESCRIBE with its DESCRIPTION, then its END (the seed's protocol), on
// a busy stream as on a fresh one: two DESCRIBEs of no id on the stream
// of calls c1 and c2 running get their two DESCRIPTIONs at once, and
// their two ENDs after c2's, the last call's, however c2 is answered
// (its handler's result, a CANCEL of it or of its stream, an ABORT, its
// timeout, the tool's failure); c1's END, with c2 still running,
// releases none of them.
func TestTool_EachDescribeOfABusyStreamGetsItsEnd(t *testing.T) {
	ends := map[string]func(l actors.Logic, rec *actorstest.Recorder){
		"result": func(l actors.Logic, rec *actorstest.Recorder) {
			deliver(t, rec, l, rec.RunJob(context.Background(), 1))
		},
		"cancel": func(l actors.Logic, rec *actorstest.Recorder) {
			deliver(t, rec, l, messages.Cancel("s", "c2"))
		},
		"cancel of the stream": func(l actors.Logic, rec *actorstest.Recorder) {
			deliver(t, rec, l, messages.Cancel("s", ""))
		},
		"abort": func(l actors.Logic, rec *actorstest.Recorder) {
			deliver(t, rec, l, messages.Abort("s"))
		},
		"timeout": func(l actors.Logic, rec *actorstest.Recorder) {
			deliver(t, rec, l, actors.Timer{Key: rec.Timers[len(rec.Timers)-1].Key})
		},
		"failure": func(l actors.Logic, rec *actorstest.Recorder) {
			l.(actors.FailureHandler).OnFailure(rec, errors.New("boom"))
		},
	}
	for name, end := range ends {
		t.Run(name, func(t *testing.T) {
			tool := tools.MustNew(tools.Definition{Name: "slow", Timeout: time.Hour,
				Handler: func(context.Context, json.RawMessage) (any, error) { return map[string]bool{"ok": true}, nil }})
			l, rec := tool.Logic(), &actorstest.Recorder{}
			deliver(t, rec, l, messages.ToolCall("s", "c1", "slow", json.RawMessage(`{}`)))
			deliver(t, rec, l, messages.ToolCall("s", "c2", "slow", json.RawMessage(`{}`)))
			deliver(t, rec, l, messages.Describe("s"))
			deliver(t, rec, l, messages.Describe("s"))
			if got := rec.Emitted; len(got) != 2 || got[0].GetType() != messages.FrameType_DESCRIPTION ||
				got[1].GetType() != messages.FrameType_DESCRIPTION {
				t.Fatalf("two DESCRIBEs on the stream of c1 and c2 answered with %q, want their two DESCRIPTIONs", lines(got))
			}
			rec.Emitted = nil
			if name == "timeout" {
				// The timer set for c1's deadline answers c1 alone: c2 began later.
				if err := rec.Deliver(l, actors.Timer{Key: rec.Timers[0].Key}); err != nil {
					t.Fatal(err)
				}
				rec.Timers = rec.Timers[1:]
			} else {
				deliver(t, rec, l, rec.RunJob(context.Background(), 0))
			}
			if got := rec.Emitted; len(got) != 2 || got[0].GetToolCallId() != "c1" || got[1].GetType() != messages.FrameType_END ||
				got[1].GetToolCallId() != "c1" {
				t.Fatalf("c1 answered, c2 running: got %q, want c1's result and END alone", lines(got))
			}
			rec.Emitted = nil
			end(l, rec)
			got := rec.Emitted
			if len(got) != 4 || got[0].GetType() != messages.FrameType_TOOL_RESULT || got[0].GetToolCallId() != "c2" ||
				got[1].GetType() != messages.FrameType_END || got[1].GetToolCallId() != "c2" {
				t.Fatalf("c2 answered: got %q, want c2's result and END, then the two DESCRIBEs' ENDs", lines(got))
			}
			for _, f := range got[2:] {
				if f.GetType() != messages.FrameType_END || f.GetStreamId() != "s" || f.GetToolCallId() != "" {
					t.Fatalf("c2 answered: got %q, want c2's result and END, then the two DESCRIBEs' ENDs", lines(got))
				}
			}
			// The stream is fresh again: a DESCRIBE there is answered at once.
			rec.Emitted = nil
			deliver(t, rec, l, messages.Describe("s"))
			if got := rec.Emitted; len(got) != 2 || got[1].GetType() != messages.FrameType_END {
				t.Fatalf("a DESCRIBE on the stream with no call running answered with %q, want DESCRIPTION and END", lines(got))
			}
		})
	}
}

// TestTool_DescribesOfABusyStreamThroughAResume: two DESCRIBEs of no id
// on the stream of a running call, then a frame of no id there that
// fails the tool actor, resumed by its supervisor: the runtime answers
// the stream, its calls and the DESCRIBEs (frames of no id, one call to
// it) with one ERROR and END of no id, and stops the call's work. The
// tool's held ENDs, which it emits once the call has its answer, are
// dropped with the rest of what it emits on the stream the runtime
// answered: no END comes after the runtime's.
func TestTool_DescribesOfABusyStreamThroughAResume(t *testing.T) {
	conn, stopped := startResumedCall(t)
	send(t, conn, messages.Describe("s"), messages.Describe("s"), messages.Meta("s", "boom", nil))
	probe := messages.Describe("p") // its answer comes after what the Resume emitted
	probe.ToolCallId = "d2"
	send(t, conn, probe)
	if _, err := conn.RecvStream(testCtx(t), "p"); err != nil {
		t.Fatal(err)
	}
	<-stopped
	got := closeFor(t, conn, "s")
	want := []string{"DESCRIPTION", "DESCRIPTION", "ERROR", "END"}
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		ok = got[i].GetType().String() == want[i] && (i < 2 || got[i].GetToolCallId() == "")
	}
	if !ok {
		t.Errorf("stream s got %q, want the two DESCRIPTIONs and the Resume's ERROR and END of no id alone", lines(got))
	}
}
