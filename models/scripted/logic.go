package scripted

import (
	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
)

// logic is the adapter of one incarnation: it plays turns, one request at
// a time per stream, waiting for timers between frames when the turn says
// so.
type logic struct {
	model   *Model
	tracker models.Tracker
	plays   map[*models.Request]*playback
	// kept are the ending frames (META finish, usage or thinking_blocks,
	// END; ERROR and END) last made for stream keptFor: a later turn of
	// that stream whose ending has the same frames sends these again,
	// as frames are immutable once sent, instead of making them anew.
	// They are kept after a turn that made calls, whose follow-up comes
	// next, and dropped after one that made none, which usually ends
	// the conversation. A conversation that ends at a turn with calls
	// (an iteration limit, a CANCEL) leaves them kept, with the slab of
	// the turn that made them: only turns of at most keepFrom frames
	// keep theirs, so an idle adapter holds at most that slab.
	keptFor string
	kept    []*messages.Frame
}

// maxKept bounds the ending frames an adapter keeps for its stream.
const maxKept = 4

// keepFrom is the most frames a turn has whose ending frames are kept: a
// larger turn (a streamed one) makes its own again rather than have an
// idle adapter hold its slab.
const keepFrom = 16

// playback is the progress of a turn answering one request.
type playback struct {
	turn      *compiledTurn
	pos       int  // next step
	waited    bool // the wait before step pos (or the ending) is over
	stopTimer func() bool
	// slab holds the frames not yet emitted, made in one allocation when
	// the first one is.
	slab []messages.Frame
}

// frame returns s as a new frame of streamID, taken from p's slab, made
// when empty with room for the frames of the turn still to make.
func (l *logic) frame(p *playback, s *step, streamID string) *messages.Frame {
	if len(p.slab) == 0 {
		p.slab = make([]messages.Frame, max(1, p.turn.frames()-p.pos-l.keptEndings(p.turn, streamID)))
	}
	f := &p.slab[0]
	p.slab = p.slab[1:]
	return s.fill(f, streamID)
}

// ending returns the frame of s, a step of a turn's ending, on streamID:
// one kept for the stream when it is the same, else a new one, kept.
func (l *logic) ending(p *playback, s *step, streamID string) *messages.Frame {
	if streamID != l.keptFor {
		l.keepFor(streamID)
	}
	if f := l.keptFrame(s); f != nil {
		return f
	}
	f := l.frame(p, s, streamID)
	if len(l.kept) < maxKept && p.turn.frames() <= keepFrom {
		l.kept = append(l.kept, f)
	}
	return f
}

// keepFor drops the kept ending frames (and their slab) and keeps the
// next ones for stream ("" for none).
func (l *logic) keepFor(stream string) {
	clear(l.kept)
	l.keptFor, l.kept = stream, l.kept[:0]
}

// keptFrame returns the kept frame that s would make, or nil.
func (l *logic) keptFrame(s *step) *messages.Frame {
	for _, f := range l.kept {
		if s.makes(f) {
			return f
		}
	}
	return nil
}

// keptEndings is how many frames of t's ending on streamID are kept.
func (l *logic) keptEndings(t *compiledTurn, streamID string) int {
	if streamID != l.keptFor || len(l.kept) == 0 {
		return 0
	}
	n := 0
	for i := range t.ending {
		if l.keptFrame(&t.ending[i]) != nil {
			n++
		}
	}
	return n
}

func (l *logic) Receive(c actors.Context, msg any) {
	switch m := msg.(type) {
	case *messages.Frame:
		if req := l.tracker.Frame(m, c.Emit); req != nil {
			l.run(c, req)
		}
	case actors.Timer:
		req, ok := m.Key.(*models.Request)
		if p := l.plays[req]; ok && p != nil && l.tracker.Live(req) {
			p.waited, p.stopTimer = true, nil
			l.run(c, req)
		}
	}
}

// run starts or resumes req and, each time a request ends, the next one
// queued on its stream.
func (l *logic) run(c actors.Context, req *models.Request) {
	for req != nil {
		p := l.plays[req]
		if p == nil {
			turn, _, err := l.model.pick(req)
			if err != nil {
				// Asking again meets the same end of the script (or the
				// same unreadable messages): a permanent failure, which
				// consumers do not retry.
				f := messages.Error(req.StreamID, err.Error())
				f.Meta = &messages.Metadata{FailureKind: models.FailurePermanent}
				c.Emit(f)
				c.Emit(messages.End(req.StreamID))
				req = l.tracker.Done(req)
				continue
			}
			if turn.instant {
				// Played whole in this step: nothing to remember, nothing
				// a CANCEL could stop.
				now := playback{turn: turn}
				l.play(c, req, &now)
				done := req
				req = l.tracker.Done(done)
				if l.model.maxRecorded == 0 { // nothing keeps done
					l.tracker.Release(done)
				}
				continue
			}
			p = &playback{turn: turn}
			if l.plays == nil {
				l.plays = make(map[*models.Request]*playback)
			}
			l.plays[req] = p
			started := req // req changes in the loop: the closure keeps its own
			l.tracker.Start(started, func() { l.forget(started) })
		}
		if !l.play(c, req, p) {
			return // waiting for a timer, or stalled
		}
		delete(l.plays, req)
		req = l.tracker.Done(req)
	}
}

// play emits the frames of p until a wait or the end; it reports whether
// the turn ended.
func (l *logic) play(c actors.Context, req *models.Request, p *playback) bool {
	t := p.turn
	for p.pos < len(t.steps) {
		s := &t.steps[p.pos]
		if s.wait > 0 && !p.waited {
			p.stopTimer = c.After(s.wait, req)
			return false
		}
		p.waited = false
		c.Emit(l.frame(p, s, req.StreamID))
		p.pos++
	}
	if t.stall {
		return false
	}
	if t.endWait > 0 && !p.waited {
		p.stopTimer = c.After(t.endWait, req)
		return false
	}
	for i := range t.ending {
		c.Emit(l.ending(p, &t.ending[i], req.StreamID))
	}
	if !t.calls {
		l.keepFor("")
	}
	return true
}

// forget drops req's playback when the tracker cancels it.
func (l *logic) forget(req *models.Request) {
	if p := l.plays[req]; p != nil && p.stopTimer != nil {
		p.stopTimer()
	}
	delete(l.plays, req)
}
