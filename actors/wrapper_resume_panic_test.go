package actors

import (
	"fmt"
	"slices"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// panicsOnAnswer is answerLog whose Wrapped fails on the ResumeAnswered
// it is told.
type panicsOnAnswer struct{ answerLog }

func (w panicsOnAnswer) HandleMessage(c WrapperContext, msg any) {
	w.answerLog.HandleMessage(c, msg)
	if _, ok := msg.(ResumeAnswered); ok {
		panic("told")
	}
}

// TestWrapper_FailingOnWhatAResumeAnsweredAnswersEachCallOnce: a wrapper
// resumed after a frame of call X, of the two calls of stream s, failed
// it, fails again on the ResumeAnswered of X, and is resumed again.
// That failure is of no call: X has the one answer of the first Resume
// (its ERROR and END), nothing more is said of it, and Y, which the
// runtime did not answer, goes on and is answered once, by the Logic.
func TestWrapper_FailingOnWhatAResumeAnsweredAnswersEachCallOnce(t *testing.T) {
	rt := startRuntimeWith(t, &RuntimeOptions{Supervision: resumeAll()})
	log := make(chan string, 64)
	echo := Duplex("echo", func(f *messages.Frame, emit func(*messages.Frame)) { emit(f) })
	conn, err := rt.Start(Wrap("w", echo, func() Wrapped { return panicsOnAnswer{answerLog{log}} }))
	if err != nil {
		t.Fatal(err)
	}
	withCall := func(f *messages.Frame, call string) *messages.Frame {
		f.ToolCallId = call
		return f
	}
	label := func(f *messages.Frame) string {
		return fmt.Sprintf("%s %s %q", f.GetStreamId(), f.GetType(), f.GetToolCallId())
	}
	if err := conn.SendAll(withCall(messages.Text("s", "X"), "X"), withCall(messages.Text("s", "Y"), "Y")); err != nil {
		t.Fatal(err)
	}
	got := recvLabeled(t, conn, `s TEXT "Y"`, label)
	if err := conn.SendAll(withCall(messages.Meta("s", "boom", nil), "X"), withCall(messages.Text("s", "Y"), "Y"),
		withCall(messages.End("s"), "Y"), messages.Text("q", "sync")); err != nil {
		t.Fatal(err)
	}
	got = append(got, recvLabeled(t, conn, `q TEXT ""`, label)...)
	want := []string{
		`s TEXT "X"`, `s TEXT "Y"`, `s ERROR "X"`, `s END "X"`, `s TEXT "Y"`, `s END "Y"`, `q TEXT ""`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("the consumer got\n%q\nwant\n%q", got, want)
	}
	var told []string
	for len(log) > 0 {
		if l := <-log; l[0] == 'a' {
			told = append(told, l)
		}
	}
	if want := []string{`answered s "X" alone=true`}; !slices.Equal(told, want) {
		t.Errorf("the wrapper was told %q, want %q", told, want)
	}
}
