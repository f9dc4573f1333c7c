package actors

import (
	"strconv"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/messages"
)

// sentFrames is an actor.Context that records the frames sent with it.
type sentFrames struct {
	actor.Context
	frames []string
}

func (r *sentFrames) Send(_ *actor.PID, msg any) {
	if f, ok := msg.(*messages.Frame); ok {
		r.frames = append(r.frames, frameLabel(f))
	}
}

// TestShell_ForgottenCallsRestNotRefused: a stopping duplex answered a
// streaming call on s as its incarnation ended, and then refuses more
// calls, each on a stream of its own, than it keeps records of: the
// record of s is forgotten. The call's argument chunk still in flight
// opens no call (its TOOL_CALL came first): it is dropped, not refused,
// which would answer the call a second time; so are its completion and
// its caller's END, which open none.
func TestShell_ForgottenCallsRestNotRefused(t *testing.T) {
	sent := &sentFrames{}
	s := &shell{finished: true, subscriber: actor.NewPID("local", "sub"), ctx: sent}
	s.noteAnswered("s", "c1", false) // as finish notes a call open at the end
	for i := range closedMax {
		n := "n" + strconv.Itoa(i)
		s.late(messages.ToolCall(n, n, "tool", nil))
	}
	if len(sent.frames) != 2*closedMax {
		t.Fatalf("%d frames for %d refused calls, want an ERROR and an END each", len(sent.frames), closedMax)
	}
	if _, kept := s.answered.get("s"); kept {
		t.Fatal("the record of s was kept: the test forgets nothing")
	}
	sent.frames = nil
	s.late(messages.ToolArgChunk("s", "c1", "{}"))
	s.late(messages.ToolComplete("s", "c1"))
	s.late(messages.End("s"))
	if len(sent.frames) != 0 {
		t.Errorf("the rest of an answered call whose record was forgotten got %q, want nothing", sent.frames)
	}
}
