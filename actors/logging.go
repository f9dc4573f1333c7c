package actors

import (
	"context"
	"log/slog"

	"github.com/polyweave/polyweave-go/supervisor"
)

// protoactorHandler passes protoactor's records to the runtime's logger,
// its INFO records (actor system started, [ACTOR] Recovering before each
// supervision decision, [DeadLetter] for messages to actors already
// gone, such as the news of background work ending at shutdown) lowered
// to DEBUG: they say nothing a host must act on, and the runtime reports
// each supervision decision itself (see logSupervision).
type protoactorHandler struct{ h slog.Handler }

func (p protoactorHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return p.h.Enabled(ctx, demote(l))
}

func (p protoactorHandler) Handle(ctx context.Context, r slog.Record) error {
	r.Level = demote(r.Level)
	return p.h.Handle(ctx, r)
}

func (p protoactorHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return protoactorHandler{p.h.WithAttrs(attrs)}
}

func (p protoactorHandler) WithGroup(name string) slog.Handler {
	return protoactorHandler{p.h.WithGroup(name)}
}

func demote(l slog.Level) slog.Level {
	if l == slog.LevelInfo {
		return slog.LevelDebug
	}
	return l
}

// protoactorLogger is the logger the runtime's actor system gets.
func protoactorLogger(logger *slog.Logger, keepInfo bool) *slog.Logger {
	logger = logger.With(slog.String("component", "protoactor"))
	if keepInfo {
		return logger
	}
	return slog.New(protoactorHandler{logger.Handler()})
}

// logSupervision writes one WARN record per supervision decision to the
// runtime's logger.
func (rt *Runtime) logSupervision(ev supervisor.Event) {
	if !rt.logger.Enabled(context.Background(), slog.LevelWarn) {
		return
	}
	rt.logger.Warn("supervision", slog.String("supervisor", ev.Supervisor), slog.String("child", ev.Child),
		slog.String("directive", ev.Directive.String()), slog.Bool("intensity_exceeded", ev.IntensityExceeded),
		slog.Int("failures", ev.Failures), slog.Any("reason", ev.Reason))
}
