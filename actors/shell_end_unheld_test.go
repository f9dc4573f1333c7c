package actors

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// The tests here hold that the Logic's END with a tool-call id its
// stream does not hold (one it emits for a frame of no call the runtime
// knows: a late argument chunk of a call it ended, say) ends none of the
// stream's calls, also when the Logic has ended none of them by their
// ids: the calls still open get their one answer, from the Logic or from
// a stop, a restart or a Resume.

// endsByCall counts the ENDs of got (as stopAnswers records them) by
// their tool-call id.
func endsByCall(got []string) map[string]int {
	ends := map[string]int{}
	for _, g := range got {
		if call, ok := strings.CutPrefix(g, "END/"); ok {
			ends[call[:strings.IndexByte(call, '[')]]++
		}
	}
	return ends
}

// TestConn_EndOfACallNotHeldEndsNoOther: a stream carries a call b the
// Logic holds (and a call of no id, or a call q, beside it); the Logic
// emits an END with id x, a call the stream never carried, before it
// ended any of its calls. That END ends nothing: the stop answers b and
// the other call once each. Taking it for the stream's END would leave b
// with no answer at all, its caller waiting forever.
func TestConn_EndOfACallNotHeldEndsNoOther(t *testing.T) {
	again := func(call string) *messages.Frame {
		f := messages.Text("s", "again x")
		f.ToolCallId = call
		return f
	}
	for _, tc := range []struct {
		name  string
		other string // the call beside b: "" for one of no id
	}{{"beside a call of no id", ""}, {"beside a call with an id", "q"}} {
		t.Run(tc.name, func(t *testing.T) {
			got := stopAnswers(t, messages.StreamingToolCall("s", "b", "hold"), again(tc.other))
			want := append(append([]string{"END/x[]"}, stoppedPair("b")...), stoppedPair(tc.other)...)
			if !slices.Equal(got, want) {
				t.Errorf("stream s got %q, want %q (b and %q answered by the stop)", got, want, tc.other)
			}
		})
	}
}

// TestConn_EndOfACallNotHeldThenRestartOrResume: as above, the Logic's
// END with id x, a call stream s never carried, comes while b is open;
// then the duplex fails. A restart answers b (and the call of no id)
// once; so does a Resume of a failure in b's argument chunk (b alone,
// with its id), the stop answering the call of no id. Neither answers
// x, which was no call of the stream.
func TestConn_EndOfACallNotHeldThenRestartOrResume(t *testing.T) {
	for _, tc := range []struct {
		name      string
		directive supervisor.Directive
		fail      *messages.Frame
		want      map[string]int // ENDs by tool-call id
	}{{
		name:      "restart",
		directive: supervisor.Restart,
		fail:      messages.Text("f", "boom"),
		want:      map[string]int{"x": 1, "b": 1, "": 1},
	}, {
		name:      "resume",
		directive: supervisor.Resume,
		fail:      messages.ToolArgChunk("s", "b", "boom"),
		want:      map[string]int{"x": 1, "b": 1, "": 1},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := stopAnswersWith(t, &RuntimeOptions{Supervision: decidingAll(tc.directive)},
				messages.StreamingToolCall("s", "b", "hold"), messages.Text("s", "again x"), tc.fail)
			if ends := endsByCall(got); !maps.Equal(ends, tc.want) {
				t.Errorf("stream s got %q: ENDs by call %v, want %v", got, ends, tc.want)
			}
		})
	}
}
