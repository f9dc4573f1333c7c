package main

import (
	"errors"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
)

// keepingContext is a Context whose runtime keeps the frames kept says,
// as the runtime keeps a frame of a call it already answered, and says
// so through EmitPassed.
type keepingContext struct {
	actors.Context
	kept func(*messages.Frame) bool
	out  []*messages.Frame
}

func (c *keepingContext) Emit(f *messages.Frame) { c.out = append(c.out, f) }

func (c *keepingContext) EmitPassed(f *messages.Frame) bool {
	if c.kept(f) {
		return false
	}
	c.Emit(f)
	return true
}

// A Logic run under -crash model's Context learns, as it would without
// it, which of its frames the runtime kept: a router under it would
// otherwise count a dropped frame as sent and lose track of its streams.
func TestFaultyContext_SaysWhichFramesWentOut(t *testing.T) {
	rt := &keepingContext{kept: func(f *messages.Frame) bool { return f.GetType() == messages.FrameType_END }}
	c := faultyContext{Context: rt, in: &injector{at: crashPoint{site: crashModel, n: 1000}}}

	if !actors.EmitPassed(c, messages.Text("s", "hello")) {
		t.Error("a TEXT the runtime let out was reported kept")
	}
	if actors.EmitPassed(c, messages.End("s")) {
		t.Error("an END the runtime kept was reported gone out")
	}
	if len(rt.out) != 1 || rt.out[0].GetType() != messages.FrameType_TEXT {
		t.Errorf("the runtime got %v, want the TEXT alone", rt.out)
	}
}

// The injected panic fires for a frame passed out through EmitPassed as
// it does through Emit, and the frame does not go out.
func TestFaultyContext_EmitPassedCrashes(t *testing.T) {
	rt := &keepingContext{kept: func(*messages.Frame) bool { return false }}
	var told string
	in := &injector{at: crashPoint{site: crashModel, n: 1}, notify: func(msg string) { told = msg }}
	c := faultyContext{Context: rt, in: in}

	func() {
		defer func() {
			var p faultPanic
			if r := recover(); r == nil {
				t.Error("no panic at the model's first frame")
			} else if err, ok := r.(error); !ok || !errors.As(err, &p) {
				t.Errorf("panicked with %v, want the injected fault", r)
			}
		}()
		actors.EmitPassed(c, messages.Text("s", "hello"))
	}()
	if !in.Fired() || told == "" {
		t.Errorf("fired %v, told %q: want the fault fired and told", in.Fired(), told)
	}
	if len(rt.out) != 0 {
		t.Errorf("the frame the fault stopped went out: %v", rt.out)
	}
}
