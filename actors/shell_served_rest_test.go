package actors

import (
	"maps"
	"sync/atomic"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// TestConn_RestOfAnsweredCallAfterServedCall: the streaming call c1 on s
// is answered by the runtime (a Resume of the failure in its frame, or a
// restart for another stream's failure) before its caller sent its END;
// the caller, not having read that answer, sends a new call c2 on s,
// served, and then a PARAM of c1, c1's rest sent before the answer.
// That PARAM is dropped: c2 opening on s does not make c1's frames a new
// call, which a stop would then answer a second time.
func TestConn_RestOfAnsweredCallAfterServedCall(t *testing.T) {
	param := messages.RawParam("s", "x", []byte(`1`))
	param.ToolCallId = "c1"
	boom := messages.Text("s", "boom")
	boom.ToolCallId = "c1"
	for _, tc := range []struct {
		name      string
		directive supervisor.Directive
		fail      *messages.Frame
	}{
		{"resume", supervisor.Resume, boom},
		{"restart", supervisor.Restart, messages.Text("f", "boom")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := stopAnswersWith(t, &RuntimeOptions{Supervision: decidingAll(tc.directive)},
				messages.StreamingToolCall("s", "c1", "hold"), tc.fail,
				messages.ToolCall("s", "c2", "hold", nil), param)
			if ends, want := endsByCall(got), map[string]int{"c1": 1, "c2": 1}; !maps.Equal(ends, want) {
				t.Errorf("stream s got %q: ENDs by call %v, want %v (c1 answered once)", got, ends, want)
			}
		})
	}
}

// TestConn_RestOfAnsweredCallAfterServedCallAndRestart: as above, a
// Resume answers c1 and the new call c2 is served on s; then a restart
// (for another stream's failure) answers c2. The PARAM of c1 that comes
// after, to the next incarnation, is still c1's rest, dropped: the
// record of c2's answer keeps c1 among its calls.
func TestConn_RestOfAnsweredCallAfterServedCallAndRestart(t *testing.T) {
	param := messages.RawParam("s", "x", []byte(`1`))
	param.ToolCallId = "c1"
	boom := messages.Text("s", "boom")
	boom.ToolCallId = "c1"
	var failures atomic.Int32
	strategy := supervisor.MustNew(&supervisor.Options{Decider: func(error) supervisor.Directive {
		if failures.Add(1) == 1 {
			return supervisor.Resume
		}
		return supervisor.Restart
	}})
	got := stopAnswersWith(t, &RuntimeOptions{Supervision: strategy},
		messages.StreamingToolCall("s", "c1", "hold"), boom,
		messages.ToolCall("s", "c2", "hold", nil), messages.Text("f", "boom"), param)
	if ends, want := endsByCall(got), map[string]int{"c1": 1, "c2": 1}; !maps.Equal(ends, want) {
		t.Errorf("stream s got %q: ENDs by call %v, want %v (c1 answered once)", got, ends, want)
	}
}
