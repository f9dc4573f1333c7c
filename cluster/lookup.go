package cluster

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pacluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/eventstream"
)

// placementName is the name of the actor that activates sessions on a
// member.
const placementName = "polyweave-placement"

// lookup is the cluster's identity lookup: rendezvous hashing over the
// members that host sessions, as protoactor's disthash lookup does, with
// what the pinned disthash lacks: the member set is guarded (disthash
// replaces it while requests read it: a data race), a member activates
// only the sessions its own view of the members gives it (a requester
// with an older view is refused, and asks again), and an activation that
// stops is forgotten (disthash compares PIDs by pointer, never finds it,
// and keeps handing out the dead PID).
type lookup struct {
	timeout time.Duration // of an activation request

	c         *pacluster.Cluster
	client    bool
	sub       *eventstream.Subscription
	placement *actor.PID

	mu  sync.RWMutex
	rdv *pacluster.Rendezvous
}

var _ pacluster.IdentityLookup = (*lookup)(nil)

func newLookup(timeout time.Duration) *lookup {
	return &lookup{timeout: timeout, rdv: pacluster.NewRendezvous()}
}

// Setup implements pacluster.IdentityLookup.
func (l *lookup) Setup(c *pacluster.Cluster, _ []string, isClient bool) {
	l.c, l.client = c, isClient
	if !isClient {
		props := actor.PropsFromProducer(func() actor.Actor { return &placement{l: l, actors: map[string]*actor.PID{}} })
		pid, err := c.ActorSystem.Root.SpawnNamed(props, placementName)
		if err != nil {
			panic(err) // as the pinned lookups do: Setup cannot fail
		}
		l.placement = pid
	}
	l.sub = c.ActorSystem.EventStream.Subscribe(func(ev any) {
		t, ok := ev.(*pacluster.ClusterTopology)
		if !ok {
			return
		}
		rdv := pacluster.NewRendezvous()
		rdv.UpdateMembers(t.Members)
		l.mu.Lock()
		l.rdv = rdv
		l.mu.Unlock()
		if l.placement != nil {
			c.ActorSystem.Root.Send(l.placement, rdv)
		}
	})
}

func (l *lookup) owner(ci *pacluster.ClusterIdentity) string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.rdv.GetByClusterIdentity(ci)
}

// Get implements pacluster.IdentityLookup: it asks the owner's placement
// actor for the activation, nil when there is no owner or it cannot
// answer (the caller asks again).
func (l *lookup) Get(ci *pacluster.ClusterIdentity) *actor.PID {
	owner := l.owner(ci)
	if owner == "" {
		return nil
	}
	res, err := l.c.ActorSystem.Root.RequestFuture(actor.NewPID(owner, placementName),
		&pacluster.ActivationRequest{ClusterIdentity: ci}, l.timeout).Result()
	if err != nil {
		return nil
	}
	r, ok := res.(*pacluster.ActivationResponse)
	if !ok || r.GetFailed() {
		return nil
	}
	return r.GetPid()
}

// RemovePid implements pacluster.IdentityLookup: a stopped activation is
// forgotten by its placement actor, which watches it.
func (l *lookup) RemovePid(*pacluster.ClusterIdentity, *actor.PID) {}

// Shutdown implements pacluster.IdentityLookup: it stops the placement
// actor, and with it every session on this member.
func (l *lookup) Shutdown() {
	if l.sub != nil {
		l.c.ActorSystem.EventStream.Unsubscribe(l.sub)
	}
	if l.placement != nil {
		_ = l.c.ActorSystem.Root.StopFuture(l.placement).Wait()
	}
}

// placement is a member's activator: it spawns the sessions this member
// owns (as its children, so that they stop with it), and stops those
// that a new member set gives to another member.
type placement struct {
	l      *lookup
	rdv    *pacluster.Rendezvous
	actors map[string]*actor.PID // by cluster identity key
}

func (p *placement) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *pacluster.ActivationRequest:
		ci := msg.GetClusterIdentity()
		key := ci.AsKey()
		if pid, ok := p.actors[key]; ok {
			ctx.Respond(&pacluster.ActivationResponse{Pid: pid})
			return
		}
		kind, ok := p.l.c.TryGetClusterKind(ci.GetKind())
		if !ok || p.rdv == nil || p.rdv.GetByClusterIdentity(ci) != ctx.Self().GetAddress() {
			// Not ours (the requester's view of the members is not
			// this member's), or not a kind this member hosts.
			ctx.Respond(&pacluster.ActivationResponse{Failed: true})
			return
		}
		pid := ctx.SpawnPrefix(pacluster.WithClusterIdentity(kind.Props, ci), ci.GetIdentity())
		kind.Inc()
		p.actors[key] = pid
		ctx.Respond(&pacluster.ActivationResponse{Pid: pid})
	case *pacluster.Rendezvous:
		p.rdv = msg
		for key, pid := range p.actors {
			if msg.GetByIdentity(key) != ctx.Self().GetAddress() {
				// Moved: the session stops here; its next request
				// activates it on its owner.
				ctx.Poison(pid)
			}
		}
	case *actor.Terminated:
		for key, pid := range p.actors {
			if pid.Equal(msg.GetWho()) {
				delete(p.actors, key)
				if kind, ok := p.l.c.TryGetClusterKind(Kind); ok {
					kind.Dec()
				}
				break
			}
		}
	}
}
