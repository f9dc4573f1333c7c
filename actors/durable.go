package actors

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/persistence"
	"google.golang.org/protobuf/proto"
)

// Persister is what a persistent duplex (a [Spec] with Persistence set)
// can do with its state, on top of its [Context]: get it with [PersisterOf].
//
// The shell of a persistent duplex keeps an event log and snapshots
// through the Spec's protoactor persistence.Provider, with protoactor's
// conventions, so its Logic receives, through Receive (a wrapper:
// through [MessageHandler]):
//
//   - after [Started], on every incarnation: the newest snapshot message
//     (if any), then every event persisted after it, in order, while
//     Recovering reports true, and then *persistence.ReplayComplete;
//   - *persistence.RequestSnapshot from inside Persist or PersistEvents
//     when an event index of the call is a multiple of N (the provider's
//     snapshot interval): answer it with PersistSnapshot(state).
//
// Persist, then apply: the snapshot requested from inside Persist must be
// the state BEFORE the events being persisted (it is stored at the first
// one's index and they are replayed after it), so a Logic persists its
// events first and applies them afterwards. A store failure panics inside
// Persist (see durability.Provider): the events are not applied and the
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
	// PersistEvents stores events as the duplex's next events, in one
	// store call when the provider can write a batch (see
	// [BatchProvider]), and returns once they are all durable. A Logic
	// persists the events of one turn together.
	PersistEvents(events []proto.Message)
	// PersistSnapshot stores state as the snapshot at the current event
	// index; call it when asked with *persistence.RequestSnapshot.
	PersistSnapshot(state proto.Message)
	// Recovering reports whether recovered messages are being replayed.
	Recovering() bool
	// Name is the persistence key: the actor's id.
	Name() string
}

// BatchProvider is implemented by a persistence.ProviderState that can
// store several events at consecutive indexes in one durable write
// (durability.Provider does). Without it, a batch is stored one event
// at a time.
type BatchProvider interface {
	PersistEvents(actorName string, firstIndex int, events []proto.Message)
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

// durableShell is the actor of a persistent duplex: the shell plus its
// event index. It does what protoactor's persistence middleware and
// Mixin do (recover on start, snapshot every N events) and also writes
// batches, which the Mixin cannot.
type durableShell struct {
	s          *shell
	state      persistence.ProviderState
	batch      BatchProvider // nil when state cannot write batches
	name       string
	index      int // of the next event
	recovering bool
	one        [1]proto.Message
}

func newDurableShell(s *shell) *durableShell {
	d := &durableShell{s: s}
	s.durable = d
	return d
}

// Receive implements actor.Actor.
func (d *durableShell) Receive(ctx actor.Context) {
	d.s.Receive(ctx)
	if _, ok := ctx.Message().(*actor.Started); ok && !d.s.finished {
		d.recover(ctx)
	}
}

// recover replays the snapshot and events into the Logic, as a new
// incarnation starts. A store failure is this incarnation's failure.
func (d *durableShell) recover(ctx actor.Context) {
	defer func() {
		if r := recover(); r != nil {
			if d.s.failure == nil {
				d.s.failure = d.s.asFailure(r)
			}
			panic(d.s.failure)
		}
	}()
	d.state = d.s.spec.Persistence.GetState()
	d.batch, _ = d.state.(BatchProvider)
	d.name = ctx.Self().Id
	d.index = 0
	d.recovering = true
	d.state.Restart()
	if snap, index, ok := d.state.GetSnapshot(d.name); ok {
		d.index = index
		d.s.deliver(snap)
	}
	d.state.GetEvents(d.name, d.index, 0, func(e any) {
		d.s.deliver(e)
		d.index++
	})
	d.recovering = false
	d.s.deliver(&persistence.ReplayComplete{})
}

// Persist implements Persister.
func (d *durableShell) Persist(event proto.Message) {
	d.one[0] = event
	d.PersistEvents(d.one[:])
	d.one[0] = nil
}

// PersistEvents implements Persister. Like protoactor's Mixin, it asks
// for a snapshot when an event index is a multiple of the interval; the
// snapshot (the state before these events) is stored at the first one's
// index.
func (d *durableShell) PersistEvents(events []proto.Message) {
	if len(events) == 0 {
		return
	}
	first := d.index
	if d.batch != nil && len(events) > 1 {
		d.batch.PersistEvents(d.name, first, events)
	} else {
		for i, e := range events {
			d.state.PersistEvent(d.name, first+i, e)
		}
	}
	interval := d.state.GetSnapshotInterval()
	if interval <= 0 {
		interval = 1
	}
	// The first multiple of interval at or after first.
	if next := (first + interval - 1) / interval * interval; next < first+len(events) {
		// Nested inside the Logic's own delivery: a panic here is that
		// delivery's failure.
		d.s.logic.Receive(d.s, &persistence.RequestSnapshot{})
	}
	d.index = first + len(events)
}

// PersistSnapshot implements Persister.
func (d *durableShell) PersistSnapshot(state proto.Message) {
	d.state.PersistSnapshot(d.name, d.index, state)
}

// Recovering implements Persister.
func (d *durableShell) Recovering() bool { return d.recovering }

// Name implements Persister.
func (d *durableShell) Name() string { return d.name }
