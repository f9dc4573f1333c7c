package actors

import (
	"fmt"

	"github.com/polyweave/polyweave-go/messages"
)

// FrameHandler is the logic of a simple frame duplex: for each frame
// written into its sink it emits zero or more frames through emit.
type FrameHandler func(f *messages.Frame, emit func(*messages.Frame))

// Duplex returns the spec of a frame duplex driven by a stateless handler.
// For state, timers or background work, write a [Logic].
func Duplex(name string, h FrameHandler) Spec {
	return Spec{Name: name, New: func() Logic {
		return LogicFunc(func(c Context, msg any) {
			if f, ok := msg.(*messages.Frame); ok {
				h(f, c.Emit)
			}
		})
	}}
}

// Pipe returns the spec of a duplex that chains stages: frames written into
// it go to the first stage, each stage's source feeds the next one's sink,
// and the last stage's frames come out. The stages are children of the
// pipe and restart with it.
func Pipe(name string, stages ...Spec) Spec {
	return Spec{Name: name, New: func() Logic { return &pipeLogic{stages: stages} }, innerDurable: anyDurable(stages)}
}

type pipeLogic struct {
	stages []Spec
	first  Ref
	last   Ref
}

func (p *pipeLogic) Receive(c Context, msg any) {
	switch m := msg.(type) {
	case Started:
		if len(p.stages) == 0 {
			c.Fail(fmt.Errorf("pipe: no stages"))
		}
		// Spawn from the end, so that each stage knows its subscriber.
		next := Ref{}
		for i := len(p.stages) - 1; i >= 0; i-- {
			spec := p.stages[i]
			spec.Subscriber = next
			ref, err := c.Spawn(spec)
			if err != nil {
				c.Fail(fmt.Errorf("pipe: stage %d: %w", i, err))
			}
			if next.IsZero() {
				p.last = ref
			}
			next = ref
		}
		p.first = next
	case *messages.Frame:
		c.Send(p.first, m)
	case ChildFrame:
		p.ReceiveChildFrame(c, m.Child, m.Frame)
	case ChildStopped:
		c.Fail(&InnerStoppedError{Inner: m.Child.String()})
	}
}

// ReceiveChildFrame implements ChildFrameReceiver: what the last stage
// emits comes out of the pipe, without a ChildFrame boxed per frame.
func (p *pipeLogic) ReceiveChildFrame(c Context, child Ref, f *messages.Frame) {
	if child.Equal(p.last) {
		c.Emit(f)
	}
}

// Join returns the spec of a duplex that merges members: every frame
// written into it goes to each member's sink, and every frame any member
// emits comes out of the joined source (in order per member). This is how
// a stage and an observer of its state share one duplex.
func Join(name string, members ...Spec) Spec {
	return Spec{Name: name, New: func() Logic { return &joinLogic{members: members} }, innerDurable: anyDurable(members)}
}

type joinLogic struct {
	members []Spec
	refs    []Ref
}

func (j *joinLogic) Receive(c Context, msg any) {
	switch m := msg.(type) {
	case Started:
		for i, spec := range j.members {
			spec.Subscriber = Ref{}
			ref, err := c.Spawn(spec)
			if err != nil {
				c.Fail(fmt.Errorf("join: member %d: %w", i, err))
			}
			j.refs = append(j.refs, ref)
		}
	case *messages.Frame:
		for _, r := range j.refs {
			c.Send(r, m)
		}
	case ChildFrame:
		c.Emit(m.Frame)
	case ChildStopped:
		c.Fail(&InnerStoppedError{Inner: m.Child.String()})
	}
}

// ReceiveChildFrame implements ChildFrameReceiver: a member's frame
// comes out of the join, without a ChildFrame boxed per frame.
func (j *joinLogic) ReceiveChildFrame(c Context, _ Ref, f *messages.Frame) { c.Emit(f) }

func anyDurable(specs []Spec) bool {
	for _, s := range specs {
		if s.Durable() {
			return true
		}
	}
	return false
}
