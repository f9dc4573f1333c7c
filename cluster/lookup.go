package cluster

import (
	"context"
	"hash/fnv"
	"slices"
	"strings"
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
// what the pinned disthash lacks: a hash that spreads identities evenly
// (the pinned rendezvous scores with 32-bit FNV-1a of nearly equal
// strings, and put 11 sessions of 12 on one member of three in a test), the member set is guarded (disthash
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
	rdv *rendezvous
}

var _ pacluster.IdentityLookup = (*lookup)(nil)

func newLookup(timeout time.Duration) *lookup {
	return &lookup{timeout: timeout, rdv: &rendezvous{}}
}

// Setup implements pacluster.IdentityLookup.
func (l *lookup) Setup(c *pacluster.Cluster, _ []string, isClient bool) {
	l.c, l.client = c, isClient
	if !isClient {
		props := actor.PropsFromProducer(func() actor.Actor {
			return &placement{l: l, actors: map[string]*actor.PID{}, ids: map[string]*pacluster.ClusterIdentity{}}
		})
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
		rdv := newRendezvous(t.Members)
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
	return l.rdv.owner(ci)
}

// Get implements pacluster.IdentityLookup: it asks the owner's placement
// actor for the activation, nil when there is no owner or it cannot
// answer (the caller asks again).
func (l *lookup) Get(ci *pacluster.ClusterIdentity) *actor.PID {
	return l.get(context.Background(), ci)
}

// get is Get that gives up (nil) as soon as ctx ends.
func (l *lookup) get(ctx context.Context, ci *pacluster.ClusterIdentity) *actor.PID {
	owner := l.owner(ci)
	if owner == "" {
		return nil
	}
	res, err := await(ctx, l.c.ActorSystem, l.c.ActorSystem.Root.RequestFuture(actor.NewPID(owner, placementName),
		&pacluster.ActivationRequest{ClusterIdentity: ci}, l.timeout))
	if err != nil {
		return nil
	}
	r, ok := res.(*pacluster.ActivationResponse)
	if !ok || r.GetFailed() || !activationOf(r.GetPid(), owner, ci) {
		return nil
	}
	return r.GetPid()
}

// activationOf says whether pid is an activation of ci on member owner, as
// its placement actor names them: a response that is not (one meant for
// a request of an earlier process at this address, whose futures had the
// same names) must not be taken, or cached, for ci.
func activationOf(pid *actor.PID, owner string, ci *pacluster.ClusterIdentity) bool {
	if pid.GetAddress() != owner {
		return false
	}
	rest, ok := strings.CutPrefix(pid.GetId(), placementName+"/"+ci.GetIdentity()+"$")
	return ok && rest != "" && !strings.ContainsAny(rest, "/$")
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
	rdv    *rendezvous
	actors map[string]*actor.PID // by cluster identity key
	ids    map[string]*pacluster.ClusterIdentity
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
		if !ok || p.rdv == nil || p.rdv.owner(ci) != ctx.Self().GetAddress() {
			// Not ours (the requester's view of the members is not
			// this member's), or not a kind this member hosts.
			ctx.Respond(&pacluster.ActivationResponse{Failed: true})
			return
		}
		pid := ctx.SpawnPrefix(pacluster.WithClusterIdentity(kind.Props, ci), ci.GetIdentity())
		kind.Inc()
		p.actors[key], p.ids[key] = pid, ci
		ctx.Respond(&pacluster.ActivationResponse{Pid: pid})
	case *rendezvous:
		p.rdv = msg
		for key, pid := range p.actors {
			if msg.owner(p.ids[key]) != ctx.Self().GetAddress() {
				// Moved: the session stops here; its next request
				// activates it on its owner.
				ctx.Poison(pid)
			}
		}
	case *actor.Terminated:
		for key, pid := range p.actors {
			if pid.Equal(msg.GetWho()) {
				delete(p.actors, key)
				delete(p.ids, key)
				if kind, ok := p.l.c.TryGetClusterKind(Kind); ok {
					kind.Dec()
				}
				break
			}
		}
	}
}

// rendezvous places identities on members by highest random weight: the
// owner of an identity is the member (of the identity's kind) whose
// score hash(member address, identity) is highest, so a change of
// members moves only the identities of the members that came or went.
// It is immutable once made.
type rendezvous struct {
	members []*pacluster.Member
}

func newRendezvous(members []*pacluster.Member) *rendezvous {
	return &rendezvous{members: slices.Clone(members)}
}

// owner returns the address of ci's owner, "" when no member hosts its
// kind.
func (r *rendezvous) owner(ci *pacluster.ClusterIdentity) string {
	var best string
	var bestScore uint64
	for _, m := range r.members {
		if !m.HasKind(ci.GetKind()) {
			continue
		}
		addr := m.Address()
		if s := score(addr, ci.GetIdentity()); best == "" || s > bestScore || s == bestScore && addr > best {
			best, bestScore = addr, s
		}
	}
	return best
}

// score is 64-bit FNV-1a of the member and the identity, finished with
// SplitMix64's mixer so that nearby inputs give unrelated scores. It is
// the same in every process.
func score(member, identity string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(member))
	h.Write([]byte{0})
	h.Write([]byte(identity))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
