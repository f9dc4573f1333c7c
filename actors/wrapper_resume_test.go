package actors

import (
	"fmt"
	"slices"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// answerLog is a Wrapped that fails on a META named "boom" written into
// it, passes the rest both ways, and logs what a Wrapped keeping its own
// record of its streams needs: the ResumeAnswered it gets, the CANCELs
// written into it, and whether each frame it passes out went out.
type answerLog struct{ log chan<- string }

func (w answerLog) Request(c WrapperContext, f *messages.Frame) {
	switch f.GetType() {
	case messages.FrameType_META:
		if f.GetName() == "boom" {
			panic("boom")
		}
	case messages.FrameType_CANCEL:
		w.log <- fmt.Sprintf("CANCEL %s %q", f.GetStreamId(), f.GetToolCallId())
	}
	c.ToInner(f)
}

func (w answerLog) Response(c WrapperContext, f *messages.Frame) {
	passed := c.ToOuterPassed(f)
	w.log <- fmt.Sprintf("%s %s %q passed=%t", f.GetType(), f.GetStreamId(), f.GetToolCallId(), passed)
}

func (w answerLog) HandleMessage(_ WrapperContext, msg any) {
	if a, ok := msg.(ResumeAnswered); ok {
		w.log <- fmt.Sprintf("answered %s %q alone=%t", a.Stream, a.ToolCallID, a.Alone)
	}
}

// TestWrapper_ToldWhatAResumeAnswered: a wrapper resumed by its
// supervisor after a frame of one of its calls failed it is told which
// call the runtime answered in its stead, before the CANCEL of that
// call: X alone, of the two calls of stream s, and then Z, the sole
// call of stream t, with its stream. What it passes out of an answered
// call (the inner duplex's echo of the CANCEL) does not go out, and
// ToOuterPassed says so; the rest does, and it says that too.
func TestWrapper_ToldWhatAResumeAnswered(t *testing.T) {
	rt := startRuntimeWith(t, &RuntimeOptions{Supervision: resumeAll()})
	log := make(chan string, 64)
	echo := Duplex("echo", func(f *messages.Frame, emit func(*messages.Frame)) { emit(f) })
	conn, err := rt.Start(Wrap("w", echo, func() Wrapped { return answerLog{log} }))
	if err != nil {
		t.Fatal(err)
	}
	text := func(stream, call string) *messages.Frame {
		f := messages.Text(stream, call)
		f.ToolCallId = call
		return f
	}
	boom := func(stream, call string) *messages.Frame {
		f := messages.Meta(stream, "boom", nil)
		f.ToolCallId = call
		return f
	}
	step := func(stream, last string, frames ...*messages.Frame) {
		t.Helper()
		if err := conn.SendAll(frames...); err != nil {
			t.Fatal(err)
		}
		recvUntil(t, conn, stream, last)
	}
	step("t", "TEXT(Z)", text("s", "X"), text("s", "Y"), text("t", "Z"))
	step("s", "END", boom("s", "X"))
	step("s", "TEXT(Y)", text("s", "Y"))
	step("t", "END", boom("t", "Z"))
	step("q", "TEXT(sync)", messages.Text("q", "sync"))

	want := []string{
		`TEXT s "X" passed=true`, `TEXT s "Y" passed=true`, `TEXT t "Z" passed=true`,
		`answered s "X" alone=true`, `CANCEL s "X"`, `CANCEL s "X" passed=false`,
		`TEXT s "Y" passed=true`,
		`answered t "Z" alone=false`, `CANCEL t ""`, `CANCEL t "" passed=false`,
		`TEXT q "" passed=true`,
	}
	// The wrapper logs a frame it passed out once it went out: the
	// consumer may read the last before it is logged.
	ctx := testContext(t)
	var got []string
	for len(got) < len(want) {
		select {
		case l := <-log:
			got = append(got, l)
		case <-ctx.Done():
			t.Fatalf("the wrapper saw only\n%q\nwant\n%q", got, want)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("the wrapper saw\n%q\nwant\n%q", got, want)
	}
}
