package inspect

import (
	"errors"
	"fmt"
	"time"

	"github.com/polyweave/polyweave-go/actors"
)

// errBadFault marks a fault request that is malformed (400 rather than
// 404).
var errBadFault = errors.New("bad fault request")

// InjectedPanic is the value of the panics [Inspector.InjectPanic] injects.
type InjectedPanic struct{}

func (InjectedPanic) String() string { return "injected from the inspector" }

// InjectPanic makes the actor id panic (actors.Runtime.InjectPanic): its
// supervisor decides what follows, as for any panic. It returns what was
// done, for the feed. The endpoint POST /api/fault/panic calls it; a host
// may call it directly.
func (in *Inspector) InjectPanic(id string) (string, error) {
	if id == "" {
		return "", fmt.Errorf("%w: no actor given", errBadFault)
	}
	if err := in.rt.InjectPanic(id, InjectedPanic{}); err != nil {
		if errors.Is(err, actors.ErrNoActor) {
			// Its error names the id whole: clipped, as the page shows ids.
			return "", fmt.Errorf("%w: %q", actors.ErrNoActor, clip(id, in.opts.Clip))
		}
		return "", err
	}
	return in.fault(id, "panic injected into %s", id), nil
}

// ErrClosed is returned (wrapped) by [Inspector.Stall] asked to stall a
// tool after Close: Close released the stalls, and nothing would release
// one set after it (a tool without a timeout would wait for ever).
var ErrClosed = errors.New("inspect: the inspector is closed")

// Stall stalls (on) or releases (off) the tool name, which must have been
// wrapped by [Inspector.Tools]: its name, or its row's (the name clipped
// to Options.Clip; tools whose names clip alike share a row and a
// switch). After Close, a stall is refused with [ErrClosed].
func (in *Inspector) Stall(name string, on bool) (string, error) {
	if name == "" {
		return "", fmt.Errorf("%w: no tool given", errBadFault)
	}
	in.mu.Lock()
	s := in.stalls[name]
	if s == nil {
		name = clip(name, in.opts.Clip)
		s = in.stalls[name]
	}
	if s == nil {
		in.mu.Unlock()
		return "", fmt.Errorf("no stallable tool %q (tools are stallable once wrapped by Inspector.Tools)", name)
	}
	select {
	case <-in.closed: // closed before Close takes in.mu to release the stalls
		if on {
			in.mu.Unlock()
			return "", fmt.Errorf("stall tool %s: %w: nothing would release it", name, ErrClosed)
		}
	default:
	}
	s.set(on)
	in.mu.Unlock()
	if on {
		return in.fault("", "tool %s stalled: its calls wait until released or timed out", name), nil
	}
	return in.fault("", "tool %s released", name), nil
}

// CutStream cuts the model stream id: the model adapter serving it (one
// observed through [Inspector.Model]) ends it with ERROR and END as if its
// connection broke.
func (in *Inspector) CutStream(stream string) (string, error) {
	if stream == "" {
		return "", fmt.Errorf("%w: no stream given", errBadFault)
	}
	in.lock()
	var model actors.Ref
	// Of the sessions of its id (other agents' too), the one where it is open.
	if s := in.twinOf(stream, func(s *session) bool { return s.stream(stream) != nil }); s != nil {
		if st := s.stream(stream); st != nil {
			model = st.model.self
		}
	}
	in.mu.Unlock()
	if model.IsZero() {
		return "", fmt.Errorf("no open model stream %q", clip(stream, in.opts.Clip))
	}
	in.rt.System().Root.Send(model.PID(), &cutStream{stream: stream})
	return in.fault(model.String(), "model stream %s cut", stream), nil
}

// fault records an injected fault in the feed.
func (in *Inspector) fault(actor, format string, args ...any) string {
	text := fmt.Sprintf(format, args...)
	in.mu.Lock()
	in.addFeed(FeedItem{Time: time.Now(), Kind: "fault", Actor: actor, Text: text, Alert: true})
	in.mu.Unlock()
	in.changed()
	return text
}
