package actors_test

import (
	"fmt"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
)

// signalSink is a protoactor process that signals each frame it gets.
type signalSink struct{ got chan *messages.Frame }

func (s signalSink) SendUserMessage(_ *actor.PID, msg any) {
	if env, ok := msg.(*actor.MessageEnvelope); ok {
		msg = env.Message
	}
	if f, ok := msg.(*messages.Frame); ok {
		s.got <- f
	}
}
func (signalSink) SendSystemMessage(*actor.PID, any) {}
func (signalSink) Stop(*actor.PID)                   {}

func echoDuplex(name string) actors.Spec {
	return actors.Duplex(name, func(f *messages.Frame, emit func(*messages.Frame)) { emit(f) })
}

func passWrappers(n int) actors.Spec {
	spec := echoDuplex("echo")
	for i := range n {
		spec = actors.Wrap(fmt.Sprintf("w%d", i), spec, func() actors.Wrapped { return actors.Hooks{} })
	}
	return spec
}

// passObserver observes and lets everything through.
type passObserver struct{ frames int }

func (o *passObserver) Received(actors.Context, any) bool { return true }
func (o *passObserver) Emitted(*messages.Frame) bool      { o.frames++; return true }
func (o *passObserver) Handled()                          {}
func (o *passObserver) Ended(error)                       {}

// observedEcho is an echo duplex with a frame observer.
func observedEcho() actors.Spec {
	spec := echoDuplex("observed")
	spec.Observe = func() actors.FrameObserver { return &passObserver{} }
	return spec
}

// TestForwardingHops_NoAllocation holds the forwarding path to its budget:
// a frame through pass-through wrappers, a pipe or a join costs no
// allocation on any hop, down to its inner duplex and back out to the
// subscriber (a child's frame reaches its parent with the child's PID
// beside it in the mailbox, not in an envelope), nor does a frame
// observer (Spec.Observe) on the way. The frame is awaited at
// the subscriber each time, so every hop's allocations are counted.
func TestForwardingHops_NoAllocation(t *testing.T) {
	rt := newRuntime(t, nil)
	for _, tc := range []struct {
		name string
		hops int // actor deliveries per frame sent
		want int // frames at the subscriber per frame sent
		spec actors.Spec
	}{
		{"1 wrapper", 3, 1, passWrappers(1)},
		{"3 wrappers", 7, 1, passWrappers(3)},
		{"pipe of 2 stages", 4, 1, actors.Pipe("pipe", echoDuplex("a"), echoDuplex("b"))},
		{"join of 2 members", 5, 2, actors.Join("join", echoDuplex("a"), echoDuplex("b"))},
		{"observed duplex", 1, 1, observedEcho()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := signalSink{got: make(chan *messages.Frame, 2)}
			pid, ok := rt.System().ProcessRegistry.Add(sink, "sink-"+tc.spec.Name)
			if !ok {
				t.Fatal("sink id taken")
			}
			defer rt.System().ProcessRegistry.Remove(pid)
			tc.spec.Subscriber = actors.RefOf(pid)
			ref, err := rt.Spawn(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			frame := messages.Text("s", "hello")
			ctx := testCtx(t) // made once: a timer per run would be counted
			allocs := testing.AllocsPerRun(500, func() {
				rt.Send(ref, frame)
				for range tc.want {
					select {
					case got := <-sink.got:
						if got != frame {
							t.Fatalf("sink got %v, want the frame sent", got)
						}
					case <-ctx.Done():
						t.Fatal("the frame never reached the subscriber")
					}
				}
			})
			if allocs != 0 {
				t.Errorf("a frame through %s (%d hops) allocates %v times, budget 0", tc.name, tc.hops, allocs)
			}
		})
	}
}
