package actors_test

import (
	"slices"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/messages"
)

// texts returns the text of each frame, with END as "<END>".
func texts(frames []*messages.Frame) []string {
	var out []string
	for _, f := range frames {
		switch f.GetType() {
		case messages.FrameType_END:
			out = append(out, "<END>")
		case messages.FrameType_ERROR:
			out = append(out, "<ERROR>")
		default:
			out = append(out, f.GetText())
		}
	}
	return out
}

// TestWrapperLogic_Hooks drives the wrapper logic step by step, with no
// actor system, through every thing a hook may do.
func TestWrapperLogic_Hooks(t *testing.T) {
	inner := actors.Duplex("inner", func(f *messages.Frame, emit func(*messages.Frame)) { emit(f) })
	hooks := actors.Hooks{
		OnRequest: func(c actors.WrapperContext, f *messages.Frame) {
			switch f.GetText() {
			case "drop":
			case "replace":
				c.ToInner(messages.Text(f.GetStreamId(), "replaced"))
			case "multiply":
				c.ToInner(f)
				c.ToInner(f)
			default:
				c.ToInner(f)
			}
		},
		OnResponse: func(c actors.WrapperContext, f *messages.Frame) {
			if f.GetText() == "call" {
				c.ToInner(messages.Text(f.GetStreamId(), "result")) // write-back
				return
			}
			c.ToOuter(f)
		},
	}
	l := actors.NewWrapperLogic(inner, hooks)
	var r actorstest.Recorder
	if err := r.Deliver(l, actors.Started{}); err != nil {
		t.Fatal(err)
	}
	if len(r.Spawned) != 1 || r.Spawned[0].Name != "inner" {
		t.Fatalf("spawned %v, want the inner duplex", r.Spawned)
	}
	innerRef := actorstest.ChildRef(1)

	cases := []struct {
		name      string
		msg       any
		wantInner []string
		wantOuter []string
	}{
		{"request pass", messages.Text("s", "hello"), []string{"hello"}, nil},
		{"request drop", messages.Text("s", "drop"), nil, nil},
		{"request replace", messages.Text("s", "replace"), []string{"replaced"}, nil},
		{"request multiply", messages.Text("s", "multiply"), []string{"multiply", "multiply"}, nil},
		{"response pass", actors.ChildFrame{Child: innerRef, Frame: messages.Text("s", "out")}, nil, []string{"out"}},
		{"response write-back", actors.ChildFrame{Child: innerRef, Frame: messages.Text("s", "call")}, []string{"result"}, nil},
		{"frame of another child is not a response", actors.ChildFrame{Child: actorstest.ChildRef(9), Frame: messages.Text("s", "x")}, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r.Reset()
			if err := r.Deliver(l, tc.msg); err != nil {
				t.Fatal(err)
			}
			var toInner []*messages.Frame
			for _, s := range r.Sent {
				if !s.To.Equal(innerRef) {
					t.Errorf("sent to %v, want the inner duplex", s.To)
				}
				toInner = append(toInner, s.Frame)
			}
			if got := texts(toInner); !slices.Equal(got, tc.wantInner) {
				t.Errorf("to inner: got %q, want %q", got, tc.wantInner)
			}
			if got := texts(r.Emitted); !slices.Equal(got, tc.wantOuter) {
				t.Errorf("to outer: got %q, want %q", got, tc.wantOuter)
			}
		})
	}
}

// TestWrapperLogic_InnerStopped: a wrapper whose inner duplex was stopped
// for good fails, so that its own supervisor sees it.
func TestWrapperLogic_InnerStopped(t *testing.T) {
	l := actors.NewWrapperLogic(actors.Duplex("inner", nil), actors.Hooks{})
	var r actorstest.Recorder
	if err := r.Deliver(l, actors.Started{}); err != nil {
		t.Fatal(err)
	}
	err := r.Deliver(l, actors.ChildStopped{Child: actorstest.ChildRef(1)})
	var stopped *actors.InnerStoppedError
	if !asError(err, &stopped) {
		t.Fatalf("got %v, want *InnerStoppedError", err)
	}
}
