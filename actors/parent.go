package actors

import (
	"context"
	"errors"

	"github.com/asynkron/protoactor-go/actor"
)

// ErrParentStopped is wrapped by the error of [Parent.StartMux] when the
// parent actor stopped (or ended the incarnation that ran the work)
// before it could spawn.
var ErrParentStopped = errors.New("actors: parent stopped")

// Parent is the actor a piece of background work runs for: the work that
// [Context.Go] starts finds it in its context with [ParentFrom]. Duplexes
// that work starts through it are children of that actor, so that its
// supervision covers them (a failure past their restart intensity
// escalates to it) and stopping or restarting it stops them. This is how
// an agent given as a tool runs its conversations under the calling
// tool's actor.
type Parent struct {
	rt   *Runtime
	pid  *actor.PID
	gone <-chan struct{} // closed when the incarnation that started the work ends
}

type parentKey struct{}

// ParentFrom returns the actor whose [Context.Go] started the work ctx
// belongs to.
func ParentFrom(ctx context.Context) (Parent, bool) {
	p, ok := ctx.Value(parentKey{}).(Parent)
	return p, ok
}

// Runtime is the runtime the parent actor runs in.
func (p Parent) Runtime() *Runtime { return p.rt }

// Ref is the parent actor.
func (p Parent) Ref() Ref { return Ref{pid: p.pid} }

// StartMux is [Runtime.StartMux] with spec spawned as a child of the
// parent actor (under the supervisor strategy of the parent's spec) rather
// than under the runtime's host. It fails with [ErrParentStopped] once the
// parent's incarnation that started the work has ended, also while the
// parent restarts: unlike [Runtime.Start], whose request a restarting
// host holds until it has started again, it does not wait for the next
// incarnation, for the work that asked is the ended one's, cancelled
// with it, and a duplex spawned for it under the next would be one that
// nobody closes.
func (p Parent) StartMux(spec Spec) (*Mux, error) {
	if p.rt == nil {
		return nil, errors.New("actors: zero Parent")
	}
	return p.rt.startMux(p.pid, p.gone, spec)
}
