package actors

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/persistence"
	"google.golang.org/protobuf/proto"
)

// Persister is what a persistent duplex (a [Spec] with Persistence set)
// can do with its state, on top of its [Context]: get it with [PersisterOf].
//
// The shell of a persistent duplex embeds protoactor's persistence.Mixin
// and runs protoactor's persistence middleware, so its Logic receives,
// through Receive (a wrapper: through [MessageHandler]):
//
//   - after [Started], on every incarnation: the newest snapshot message
//     (if any), then every event persisted after it, in order, while
//     Recovering reports true, and then *persistence.ReplayComplete;
//   - *persistence.RequestSnapshot from inside Persist, every N events
//     (N is the provider's snapshot interval): answer it with
//     PersistSnapshot(state).
//
// Persist, then apply: the snapshot requested from inside Persist must be
// the state BEFORE the event being persisted (protoactor stores it at that
// event's index and replays the event after it), so a Logic persists an
// event first and applies it afterwards. A store failure panics inside
// Persist (see durability.Provider): the event is not applied and the
// supervisor gets the failure.
//
// The persistence key is the actor's id (its path of names), so a
// persistent duplex and all its ancestors need stable names.
//
// A Persister is only valid inside the Receive call whose Context it came
// from, like the Context itself.
type Persister interface {
	// Persist stores event as the duplex's next event and returns once it
	// is durable.
	Persist(event proto.Message)
	// PersistSnapshot stores state as the snapshot at the current event
	// index; call it when asked with *persistence.RequestSnapshot.
	PersistSnapshot(state proto.Message)
	// Recovering reports whether recovered messages are being replayed.
	Recovering() bool
	// Name is the persistence key: the actor's id.
	Name() string
}

// PersisterOf returns the [Persister] of the duplex whose Logic got c, and
// false when the duplex is not persistent. It sees through a wrapper's
// [WrapperContext]. A test Context can offer one by implementing
// Persister() (Persister, bool).
func PersisterOf(c Context) (Persister, bool) {
	for {
		switch x := c.(type) {
		case *WrapperLogic:
			c = x.c
		case *shell:
			if x.durable == nil {
				return nil, false
			}
			return x.durable, true
		case interface{ Persister() (Persister, bool) }:
			return x.Persister()
		default:
			return nil, false
		}
	}
}

// durableShell is the actor of a persistent duplex: the shell plus
// protoactor's persistence Mixin, which must be embedded in the actor
// value itself (the middleware type-asserts ctx.Actor() to its unexported
// interface).
type durableShell struct {
	persistence.Mixin
	s          *shell
	persisting bool // inside Persist: a RequestSnapshot is a nested call
}

func newDurableShell(s *shell) *durableShell {
	d := &durableShell{s: s}
	s.durable = d
	return d
}

// Receive implements actor.Actor.
func (d *durableShell) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		// protoactor's persistence middleware, run here rather than as a
		// props middleware so that every Spec builds the same props: it
		// passes Started on, then replays the snapshot and the events
		// through nested calls of this Receive.
		using := persistence.Using(d.s.spec.Persistence)
		using(func(actor.ReceiverContext, *actor.MessageEnvelope) { d.s.Receive(ctx) })(ctx, actor.WrapEnvelope(ctx.Message()))
	case *persistence.RequestSnapshot:
		if d.persisting {
			// Nested inside the Logic's Persist, itself inside the shell's
			// delivery: a panic here is that delivery's failure.
			d.s.logic.Receive(d.s, ctx.Message())
			return
		}
		d.s.Receive(ctx)
	default:
		d.s.Receive(ctx)
	}
}

// Persist implements Persister.
func (d *durableShell) Persist(event proto.Message) {
	d.persisting = true
	defer func() { d.persisting = false }()
	d.PersistReceive(event)
}
