package actors

import (
	"maps"
	"slices"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// TestConn_ParamAfterArgsCompleteOpensNewCall: once the caller's META
// tool_complete of the streaming call c1 on s came, the end of its
// arguments, a PARAM with c1's id is a new call reusing the id (a
// model's next response), which the stop answers, however c1 was
// answered and whenever its tool_complete came. Dropped as c1's rest, or
// delivered as the rest of a call the Logic ended, it got no answer.
func TestConn_ParamAfterArgsCompleteOpensNewCall(t *testing.T) {
	resume := &RuntimeOptions{Supervision: decidingAll(supervisor.Resume)}
	for _, tc := range []struct {
		name   string
		opts   *RuntimeOptions
		frames []*messages.Frame
		want   map[string]int
	}{
		// A Resume answers c1 alone, c0 going on; the tool_complete
		// comes after.
		{"shared", resume, []*messages.Frame{messages.ToolCall("s", "c0", "hold", nil),
			messages.StreamingToolCall("s", "c1", "hold"), withID(messages.Text("s", "boom"), "c1"),
			messages.ToolComplete("s", "c1"), paramOf("c1")}, map[string]int{"c0": 1, "c1": 2}},
		// A Resume answers c1, whose tool_complete comes after; new calls
		// c2 and c3 are served on s, and a second Resume answers c2 alone,
		// c3 going on: the record of c2's answer keeps c1 complete.
		{"kept-by-shared", resume, []*messages.Frame{messages.StreamingToolCall("s", "c1", "hold"),
			withID(messages.Text("s", "boom"), "c1"), messages.ToolComplete("s", "c1"),
			messages.StreamingToolCall("s", "c2", "hold"), messages.StreamingToolCall("s", "c3", "hold"),
			withID(messages.Text("s", "boom"), "c2"), paramOf("c1")}, map[string]int{"c1": 2, "c2": 1, "c3": 1}},
		// The Logic ends c1 by its id, c0 keeping s open; the
		// tool_complete comes after.
		{"ended", nil, []*messages.Frame{messages.ToolCall("s", "c0", "hold", nil),
			messages.StreamingToolCall("s", "c1", "hold"), withID(messages.Text("s", "again c1"), "c1"),
			messages.ToolComplete("s", "c1"), paramOf("c1")}, map[string]int{"c0": 1, "c1": 2}},
		// The tool_complete comes, then the Logic ends c1 by its id (a
		// tool answered at the end of its arguments), c0 keeping s open.
		{"complete-then-ended", nil, []*messages.Frame{messages.ToolCall("s", "c0", "hold", nil),
			messages.StreamingToolCall("s", "c1", "hold"), messages.ToolComplete("s", "c1"),
			withID(messages.Text("s", "again c1"), "c0"), paramOf("c1")}, map[string]int{"c0": 1, "c1": 2}},
		// The tool_complete comes before a restart for another stream's
		// failure answers c1: the PARAM comes to the next incarnation.
		{"complete-then-restart", &RuntimeOptions{Supervision: decidingAll(supervisor.Restart)},
			[]*messages.Frame{messages.StreamingToolCall("s", "c1", "hold"), messages.ToolComplete("s", "c1"),
				messages.Text("f", "boom"), paramOf("c1")}, map[string]int{"c1": 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := stopAnswersWith(t, tc.opts, tc.frames...)
			if ends := endsByCall(got); !maps.Equal(ends, tc.want) {
				t.Errorf("stream s got %q: ENDs by call %v, want %v (the new call c1 answered by the stop)", got, ends, tc.want)
			}
		})
	}
}

// TestConn_ChunkAfterArgsCompleteIsRest: a Resume answers the streaming
// call c1 on s; its caller's tool_complete comes after, then a chunk of
// its arguments (of c1, sent before its answer). The chunk opens no call:
// dropped, the stop answers nothing more.
func TestConn_ChunkAfterArgsCompleteIsRest(t *testing.T) {
	got := stopAnswersWith(t, &RuntimeOptions{Supervision: decidingAll(supervisor.Resume)},
		messages.StreamingToolCall("s", "c1", "hold"), withID(messages.Text("s", "boom"), "c1"),
		messages.ToolComplete("s", "c1"), messages.ToolArgChunk("s", "c1", "{}"))
	if ends, want := endsByCall(got), map[string]int{"c1": 1}; !maps.Equal(ends, want) {
		t.Errorf("stream s got %q: ENDs by call %v, want %v (c1 answered once)", got, ends, want)
	}
}

// TestConn_EndOfNewCallReusingSharedID: a Resume answers c1 alone on s,
// c0 going on; after c1's tool_complete a PARAM with its id opens a new
// call, and the Logic ends it itself: its END is the new call's, passed
// on, not dropped as the answered c1's (see shell.mutedCalls), and the
// stop answers c0 alone.
func TestConn_EndOfNewCallReusingSharedID(t *testing.T) {
	got := stopAnswersWith(t, &RuntimeOptions{Supervision: decidingAll(supervisor.Resume)},
		messages.ToolCall("s", "c0", "hold", nil), messages.StreamingToolCall("s", "c1", "hold"),
		withID(messages.Text("s", "boom"), "c1"), messages.ToolComplete("s", "c1"), paramOf("c1"),
		withID(messages.Text("s", "again c1"), "c1"))
	want := []string{"ERROR(panic in polyweave/d: boom)/c1[failed]", "END/c1[]", "END/c1[]",
		"ERROR(duplex stopped)/c0[stopped]", "END/c0[]"}
	if !slices.Equal(got, want) {
		t.Errorf("stream s got %q, want %q (the new call c1 ended by the Logic)", got, want)
	}
}
