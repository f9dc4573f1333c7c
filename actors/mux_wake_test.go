package actors

import (
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// TestPort_WakeOnlyForAcceptedFrames checks that a port with a wake
// function queues every frame but signals a waiting reader only for the
// frames it accepts, and that a port without one signals every frame.
func TestPort_WakeOnlyForAcceptedFrames(t *testing.T) {
	var asked []messages.FrameType
	p := &port{notify: make(chan struct{}, 1), wake: func(f *messages.Frame) bool {
		asked = append(asked, f.GetType())
		return f.GetType() == messages.FrameType_END
	}}
	p.SendUserMessage(nil, messages.Text("s", "a"))
	p.SendUserMessage(nil, messages.Text("s", "b"))
	if len(p.notify) != 0 {
		t.Fatal("a frame wake refuses signalled the reader")
	}
	p.SendUserMessage(nil, messages.End("s"))
	if len(p.notify) != 1 {
		t.Fatal("END, which wake accepts, did not signal the reader")
	}
	if len(p.queue) != 3 || len(asked) != 3 {
		t.Fatalf("%d frames queued, wake asked about %d, want 3 and 3", len(p.queue), len(asked))
	}

	plain := &port{notify: make(chan struct{}, 1)}
	plain.SendUserMessage(nil, messages.Text("s", "a"))
	if len(plain.notify) != 1 {
		t.Fatal("a port without wake did not signal a frame")
	}
}
