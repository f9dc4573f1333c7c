package actorstest

import (
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/internal/leakcheck"
)

// HostSystem starts a protoactor system of a host application's own, with
// a quiet logger, for tests that embed a runtime in it. t's cleanup shuts
// it down and then fails t if any goroutine started since is still
// running; register the embedded runtimes' Close after calling it, so
// that they run first.
func HostSystem(t testing.TB) *actor.ActorSystem {
	t.Helper()
	before := goleak.IgnoreCurrent()
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
		actor.WithDeadLetterThrottleInterval(10*time.Millisecond))
	t.Cleanup(func() {
		system.Shutdown()
		leakcheck.VerifyNone(t, before)
	})
	return system
}

// Embedder is a host application's actor that builds a runtime with Opts
// as its child when it starts (RuntimeOptions.Parent is set to it), and
// hands the runtime over on Ready.
type Embedder struct {
	Opts  actors.RuntimeOptions
	Ready chan<- *actors.Runtime
}

// Receive implements actor.Actor.
func (h *Embedder) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*actor.Started); ok {
		opts := h.Opts
		opts.Parent = ctx
		rt, err := actors.NewRuntime(&opts)
		if err != nil {
			panic(err)
		}
		h.Ready <- rt
	}
}
