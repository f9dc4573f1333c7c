package streaming

import (
	"context"
	"log/slog"
	"strings"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
)

// AnswerFunc answers one request. It runs on a goroutine of its own with a
// context cancelled by CANCEL, ABORT or the adapter stopping. It hands the
// frames of the answer that are ready early (TEXT deltas, META frames)
// to emit as they arrive, and returns the frames that end the answer (tool
// calls, META usage and finish; not END) or the error that ends it (the
// text of the ERROR frame; one marked by models.Permanent makes it of
// kind models.FailurePermanent). emit may be called from that goroutine only,
// and not after the function returned.
type AnswerFunc func(ctx context.Context, req *models.Request, emit func(*messages.Frame)) ([]*messages.Frame, error)

// Spec returns the spec of an adapter duplex named name answering its
// requests with answer.
func Spec(name string, answer AnswerFunc) actors.Spec {
	return actors.Spec{Name: name, New: func() actors.Logic { return &logic{answer: answer} }}
}

// outcome is what a request's background work returns.
type outcome struct {
	frames []*messages.Frame
	err    error
}

// logic is the adapter of one incarnation.
type logic struct {
	answer  AnswerFunc
	tracker models.Tracker
}

func (l *logic) Receive(c actors.Context, msg any) {
	switch m := msg.(type) {
	case *messages.Frame:
		if req := l.tracker.Frame(m, c.Emit); req != nil {
			l.start(c, req)
		}
	case actors.AsyncProgress:
		if req, ok := m.Key.(*models.Request); ok && l.tracker.Live(req) {
			c.Emit(m.Value.(*messages.Frame))
		}
	case actors.AsyncDone:
		req, ok := m.Key.(*models.Request)
		if !ok || !l.tracker.Live(req) {
			return // cancelled: its ERROR and END are out already
		}
		out, _ := m.Value.(outcome)
		if m.Err != nil {
			out.err = m.Err
		}
		l.finish(c, req, out)
	}
}

// start runs the answer of req in the background.
func (l *logic) start(c actors.Context, req *models.Request) {
	answer, logger := l.answer, c.Logger()
	cancel := c.Go(req, func(ctx context.Context, progress func(any)) any {
		ctx = context.WithValue(ctx, loggerKey{}, logger)
		frames, err := answer(ctx, req, func(f *messages.Frame) { progress(f) })
		return outcome{frames: frames, err: err}
	})
	l.tracker.Start(req, cancel)
}

func (l *logic) finish(c actors.Context, req *models.Request, out outcome) {
	if out.err != nil {
		// A frame's text must be UTF-8 to be marshalled (frames cross
		// nodes); libraries quote servers' bytes as they are.
		f := messages.Error(req.StreamID, strings.ToValidUTF8(out.err.Error(), "\uFFFD"))
		if models.IsPermanent(out.err) {
			f.Meta = &messages.Metadata{FailureKind: models.FailurePermanent}
		}
		c.Emit(f)
	} else {
		for _, f := range out.frames {
			c.Emit(f)
		}
	}
	c.Emit(messages.End(req.StreamID))
	if next := l.tracker.Done(req); next != nil {
		l.start(c, next)
	}
}

type loggerKey struct{}

// Logger returns the logger of the adapter actor answering the request of
// ctx (the runtime's logger, with the actor's id), or a logger that
// discards when ctx does not come from an adapter.
func Logger(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok && l != nil {
		return l
	}
	return slog.New(slog.DiscardHandler)
}
