package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	pacluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultEtcdKey is the etcd key prefix under which [Etcd] registers
// members when baseKey is empty.
const DefaultEtcdKey = "/polyweave"

// DefaultEtcdTimeout bounds each request of the etcd provider to etcd, and
// its start and its shutdown, unless [EtcdTimeout] says otherwise.
const DefaultEtcdTimeout = 10 * time.Second

// ErrEtcdUnreachable is the cause of the error [Start] returns when the
// etcd provider could not reach etcd within its timeout (see
// [EtcdTimeout]), of the provider's shutdown error when it could not
// deregister in time, and of the error of any of its requests that etcd
// did not answer in time.
var ErrEtcdUnreachable = errors.New("etcd unreachable")

// EtcdOption configures [Etcd].
type EtcdOption func(*etcdProvider)

// EtcdTimeout bounds the etcd provider's exchanges with etcd: each
// request (a request that etcd does not answer within d fails with an
// error wrapping ErrEtcdUnreachable), and, as a whole, the member's start
// (reading the members, registering this one) and its close
// (deregistering). When the start or the close has not finished within d,
// the provider gives up: it closes its connection, which ends its pending
// requests at once, and Start (or Close) returns an error wrapping
// ErrEtcdUnreachable that names the endpoints. A Start that gives up does
// not deregister (nothing answers) and returns without waiting further.
// The watch of the members and the lease's keep-alive stream are not
// requests: they last as long as the member. d zero or negative means
// DefaultEtcdTimeout.
func EtcdTimeout(d time.Duration) EtcdOption {
	return func(e *etcdProvider) {
		if d > 0 {
			e.timeout = d
		}
	}
}

// Etcd returns protoactor's etcd provider: members register under baseKey
// (default DefaultEtcdKey) in the etcd cluster at endpoints (host:port of
// its client URLs), each with a lease it keeps alive, and every member
// and client watches the prefix. Members join and leave at any time: a
// member that closes deregisters at once, and one that dies leaves when
// its lease expires (about three seconds). Give each [Start] its own
// provider. Clusters of other names ([Options].Name, which may not hold a
// "/") may share the etcd and baseKey: a member sees its own cluster's
// members only. A member whose watch of the members broke off for long
// (etcd compacted the changes it missed) reads them again.
//
// A member that stops answering for longer than its lease without dying
// (a stopped process, a long garbage collection, a migrated VM) is seen
// to leave too, and is not taken back when it resumes: it registers again
// under the same id, but the pinned protoactor never counts an id again
// once it saw it leave, and the member drops itself from its own view. It
// could then host no session nor reach the other members, so it leaves
// (see [Member.Excluded]): its Runs fail with an error wrapping
// [ErrExcluded], it deregisters and stops, and then Excluded's channel is
// closed. The host should start a new member in its place (a new Start,
// with a new provider), which joins under a new id.
//
// The provider connects to etcd when the member starts (after protoactor
// has set up gRPC, whose global logger it replaces then), and closes that
// connection when the member closes; a provider that is not used holds
// nothing. The pinned provider's keep-alive goroutine may sleep for up to
// a second after the member has closed before it ends.
//
// An etcd that cannot be reached does not hang the member: its start and
// its shutdown, and each request, are bounded (DefaultEtcdTimeout, or
// [EtcdTimeout]). The etcd client logs to the member's logger
// ([Options].Logger), with the attribute component=etcd-client.
func Etcd(endpoints []string, baseKey string, opts ...EtcdOption) (pacluster.ClusterProvider, error) {
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("cluster: etcd provider: no endpoints")
	}
	if baseKey == "" {
		baseKey = DefaultEtcdKey
	}
	if f, ok := reflect.TypeFor[etcd.Provider]().FieldByName("client"); !ok || f.Type != reflect.TypeFor[*clientv3.Client]() {
		return nil, errors.New("cluster: etcd provider: protoactor's etcd provider has no client field to close: update cluster.Etcd for this protoactor")
	}
	e := &etcdProvider{baseKey: baseKey, timeout: DefaultEtcdTimeout, log: slog.New(slog.DiscardHandler),
		cfg:     clientv3.Config{Endpoints: slices.Clone(endpoints), DialTimeout: 5 * time.Second},
		stopped: make(chan struct{})}
	for _, o := range opts {
		o(e)
	}
	return e, nil
}

// etcdProvider starts the pinned etcd provider, and its etcd client, when
// the member starts, and closes the client when the member is done with
// it: the pinned provider never does.
type etcdProvider struct {
	baseKey string
	cfg     clientv3.Config
	timeout time.Duration // of a request, a start or a shutdown
	log     *slog.Logger  // the member's (see useLogger)

	mu      sync.Mutex
	p       *etcd.Provider // once started
	client  *clientv3.Client
	used    bool
	gaveUp  bool          // bounded closed the client: etcd did not answer
	closed  bool          // Shutdown has run
	stopped chan struct{} // closed when Shutdown has stopped the pinned provider
}

// useLogger makes the etcd client log to the member's logger; Start calls
// it before it starts the provider.
func (e *etcdProvider) useLogger(l *slog.Logger) {
	e.log = l.With(slog.String("component", "etcd-client"))
}

func (e *etcdProvider) StartMember(c *pacluster.Cluster) error {
	p, err := e.start(c.Config.Name)
	if err != nil {
		return err
	}
	return e.bounded("register with", func() error { return p.StartMember(c) })
}

func (e *etcdProvider) StartClient(c *pacluster.Cluster) error {
	p, err := e.start(c.Config.Name)
	if err != nil {
		return err
	}
	return e.bounded("read the members from", func() error { return p.StartClient(c) })
}

// bounded runs fn, an exchange of the pinned provider with etcd (several
// requests, each bounded by e.timeout: see boundRequests), for up to
// e.timeout. When that passes, it closes the etcd client, which ends
// fn's pending request at once, waits for fn to return, and returns an
// error wrapping ErrEtcdUnreachable; the provider is of no further use.
// A panic of fn is returned as an error.
func (e *etcdProvider) bounded(what string, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("panic: %v", p)
			}
		}()
		done <- fn()
	}()
	t := time.NewTimer(e.timeout)
	defer t.Stop()
	where := strings.Join(e.cfg.Endpoints, ",")
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("cluster: etcd provider: %s etcd at %s: %w", what, where, err)
		}
		return nil
	case <-t.C:
	}
	e.gaveUp = true
	_ = e.client.Close() // ends fn's pending request
	err := <-done
	if errors.Is(err, ErrEtcdUnreachable) { // a request's own timeout passed too
		return fmt.Errorf("cluster: etcd provider: %s etcd at %s: %w", what, where, err)
	}
	return fmt.Errorf("cluster: etcd provider: %s etcd at %s: %w: no answer within %v (then: %v)", what, where, ErrEtcdUnreachable, e.timeout, err)
}

// checkName refuses a cluster name that the pinned provider cannot tell
// apart: it names a member by the last "/"-separated segment of its key,
// BASE/NAME/NAME@ID, so with a "/" in NAME the members it read when it
// started would never leave its view (their deletions name another id).
func (e *etcdProvider) checkName(name string) error {
	if strings.Contains(name, "/") {
		return fmt.Errorf("cluster: etcd provider: cluster name %q holds a \"/\", which the etcd provider cannot use in its keys", name)
	}
	return nil
}

func (e *etcdProvider) start(name string) (*etcd.Provider, error) {
	if err := e.checkName(name); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.used {
		return nil, errors.New("cluster: etcd provider: already used by a member; give each Start its own")
	}
	e.used = true
	cfg := e.cfg
	cfg.Logger = zapToSlog(e.log)
	p, err := etcd.NewWithConfig(e.baseKey, cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster: etcd provider: %w", err)
	}
	// The pinned provider keeps its client in an unexported field, and
	// there is no other way to reach it (Etcd checked that it is there).
	v := reflect.ValueOf(p).Elem()
	e.p, e.client = p, *(**clientv3.Client)(unsafe.Pointer(v.FieldByName("client").UnsafeAddr()))
	e.boundRequests(&membersView{key: e.baseKey + "/" + name})
	return p, nil
}

// boundRequests makes every request of the etcd client end after
// e.timeout, or as soon as the client closes: the pinned provider's
// requests have no deadline, and etcd's client retries a request that
// failed because its connection was closing until the request's own
// context ends. It also keeps the pinned provider's watch loop, which
// watches again as soon as a watch ends, from spinning on a closed client,
// and keeps its read and its watches of the members to this cluster's,
// each watch going on where the one before ended (see membersView).
func (e *etcdProvider) boundRequests(view *membersView) {
	r := requests{timeout: e.timeout, client: e.client.Ctx()}
	kv := boundedKV{KV: e.client.KV, r: r}
	view.read = kv.Get
	e.client.KV = membersKV{KV: kv, view: view}
	e.client.Lease = boundedLease{Lease: e.client.Lease, r: r}
	e.client.Watcher = stoppedWatcher{Watcher: e.client.Watcher, client: e.client.Ctx(), stopped: e.stopped, view: view}
}

// Shutdown deregisters the member (when it had started), stops watching
// and closes the etcd client, which ends the lease's keep-alive. It gives
// up deregistering after the provider's timeout (the lease then expires),
// and does not try when the provider has already given up on etcd (its
// start timed out, and its client is closed).
func (e *etcdProvider) Shutdown(graceful bool) (err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.p == nil || e.closed {
		return nil
	}
	e.closed = true
	defer close(e.stopped) // after the pinned Shutdown: see stoppedWatcher
	if e.gaveUp {
		// The pinned Shutdown is what stops its goroutines; on the
		// closed client its deregistration fails at once, as it should.
		_ = e.p.Shutdown(graceful)
		return nil
	}
	defer func() {
		// Also when the pinned Shutdown failed or timed out.
		if e.gaveUp {
			return // bounded closed it
		}
		if cerr := e.client.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close etcd client: %w", cerr)
		}
	}()
	return e.bounded("deregister from", func() error { return e.p.Shutdown(graceful) })
}

// requests bounds the etcd client's requests (see boundRequests).
type requests struct {
	timeout time.Duration
	client  context.Context // the client's: ends when it closes
}

// bound runs a request with ctx bounded by r.timeout and by the client's
// life; a request that etcd did not answer in time fails with an error
// wrapping ErrEtcdUnreachable.
func bound[T any](ctx context.Context, r requests, req func(context.Context) (T, error)) (T, error) {
	rctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	stop := context.AfterFunc(r.client, cancel)
	defer stop()
	if r.client.Err() != nil {
		cancel() // closed: AfterFunc cancels, but later
	}
	resp, err := req(rctx)
	if err != nil && ctx.Err() == nil && errors.Is(rctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("%w: no answer within %v: %w", ErrEtcdUnreachable, r.timeout, err)
	}
	return resp, err
}

// boundedKV bounds the requests of a KV (see bound). A Txn is not
// bounded: the pinned provider makes none.
type boundedKV struct {
	clientv3.KV
	r requests
}

func (kv boundedKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	return bound(ctx, kv.r, func(ctx context.Context) (*clientv3.PutResponse, error) { return kv.KV.Put(ctx, key, val, opts...) })
}

func (kv boundedKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	return bound(ctx, kv.r, func(ctx context.Context) (*clientv3.GetResponse, error) { return kv.KV.Get(ctx, key, opts...) })
}

func (kv boundedKV) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	return bound(ctx, kv.r, func(ctx context.Context) (*clientv3.DeleteResponse, error) { return kv.KV.Delete(ctx, key, opts...) })
}

func (kv boundedKV) Compact(ctx context.Context, rev int64, opts ...clientv3.CompactOption) (*clientv3.CompactResponse, error) {
	return bound(ctx, kv.r, func(ctx context.Context) (*clientv3.CompactResponse, error) { return kv.KV.Compact(ctx, rev, opts...) })
}

func (kv boundedKV) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	return bound(ctx, kv.r, func(ctx context.Context) (clientv3.OpResponse, error) { return kv.KV.Do(ctx, op) })
}

// boundedLease bounds the requests of a Lease (see bound); its
// keep-alive stream lasts as long as its context, or the client.
type boundedLease struct {
	clientv3.Lease
	r requests
}

func (l boundedLease) Grant(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error) {
	return bound(ctx, l.r, func(ctx context.Context) (*clientv3.LeaseGrantResponse, error) { return l.Lease.Grant(ctx, ttl) })
}

func (l boundedLease) Revoke(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseRevokeResponse, error) {
	return bound(ctx, l.r, func(ctx context.Context) (*clientv3.LeaseRevokeResponse, error) { return l.Lease.Revoke(ctx, id) })
}

func (l boundedLease) TimeToLive(ctx context.Context, id clientv3.LeaseID, opts ...clientv3.LeaseOption) (*clientv3.LeaseTimeToLiveResponse, error) {
	return bound(ctx, l.r, func(ctx context.Context) (*clientv3.LeaseTimeToLiveResponse, error) {
		return l.Lease.TimeToLive(ctx, id, opts...)
	})
}

func (l boundedLease) Leases(ctx context.Context) (*clientv3.LeaseLeasesResponse, error) {
	return bound(ctx, l.r, l.Lease.Leases)
}

func (l boundedLease) KeepAliveOnce(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
	return bound(ctx, l.r, func(ctx context.Context) (*clientv3.LeaseKeepAliveResponse, error) {
		return l.Lease.KeepAliveOnce(ctx, id)
	})
}

// membersKV is a KV whose read of the members (the pinned provider's Get
// of the prefix BASE/NAME) reads this cluster's only (see membersView).
type membersKV struct {
	clientv3.KV
	view *membersView
}

func (kv membersKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	if key != kv.view.key {
		return kv.KV.Get(ctx, key, opts...)
	}
	resp, err := kv.KV.Get(ctx, kv.view.prefix(), opts...)
	if err != nil {
		return nil, err
	}
	kv.view.took(resp)
	return resp, nil
}

// membersView keeps the pinned provider's read and watches of the members
// to this cluster's keys, and makes every watch go on where the provider's
// view ended: its read, or the last change it was told.
//
// The pinned provider reads and watches the prefix BASE/NAME, without a
// trailing "/": the members of every cluster whose name begins with NAME
// ("polyweave-staging" for "polyweave") were taken for this cluster's.
// Both go to BASE/NAME/ instead, and only keys one level below it count.
//
// The pinned provider watches again whenever a watch ends, from whatever
// revision etcd has reached then: the changes in between were lost for
// good (a member that left kept, one that joined never seen). Each watch
// starts right after the last change the provider was told of (after its
// read for the first). When etcd has compacted that revision, the
// changes are gone: the members are read again, and the provider is told
// the difference with what it was told before (a put for each member new
// or changed, a delete for each one gone), in one response; the next
// watch starts after that read.
type membersView struct {
	key  string                                                                             // BASE/NAME: the pinned provider's
	read func(context.Context, string, ...clientv3.OpOption) (*clientv3.GetResponse, error) // a bounded Get

	mu      sync.Mutex
	watched bool             // the first watch has begun
	next    int64            // the revision the next watch starts from; 0 before the read
	known   map[string]int64 // the members' keys the provider was told of, with their revision
}

// prefix is the prefix of this cluster's members' keys.
func (v *membersView) prefix() string { return v.key + "/" }

// ours reports whether key is a member's key of this cluster:
// BASE/NAME/ID.
func (v *membersView) ours(key []byte) bool {
	id, ok := strings.CutPrefix(string(key), v.prefix())
	return ok && id != "" && !strings.Contains(id, "/")
}

// took keeps this cluster's members of read resp, which the provider
// takes as its view, and makes the next watch start after it.
func (v *membersView) took(resp *clientv3.GetResponse) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.known = map[string]int64{}
	kvs := resp.Kvs[:0:0]
	for _, kv := range resp.Kvs {
		if v.ours(kv.Key) {
			kvs = append(kvs, kv)
			v.known[string(kv.Key)] = kv.ModRevision
		}
	}
	resp.Kvs, resp.Count = kvs, int64(len(kvs))
	v.next = resp.Header.GetRevision() + 1
}

// testHookFirstWatch, unless nil, runs before the first watch of every
// etcd provider's members (the tests set it).
var testHookFirstWatch func()

// from returns the revision the next watch starts from (0: now).
func (v *membersView) from() int64 {
	v.mu.Lock()
	first := !v.watched
	v.watched = true
	v.mu.Unlock()
	if first && testHookFirstWatch != nil {
		testHookFirstWatch()
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.next
}

// told records that the provider was told of ev.
func (v *membersView) told(ev *clientv3.Event) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if ev.Type == clientv3.EventTypeDelete {
		delete(v.known, string(ev.Kv.Key))
	} else {
		v.known[string(ev.Kv.Key)] = ev.Kv.ModRevision
	}
}

// toldUpTo records that the provider was told every change up to rev.
func (v *membersView) toldUpTo(rev int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.next = max(v.next, rev+1)
}

// reread reads the members again and returns a watch response that tells
// the provider what changed since what it was told (no events: nothing),
// or false when the read failed.
func (v *membersView) reread(ctx context.Context) (clientv3.WatchResponse, bool) {
	resp, err := v.read(ctx, v.prefix(), clientv3.WithPrefix())
	if err != nil {
		return clientv3.WatchResponse{}, false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	rev := resp.Header.GetRevision()
	now := map[string]int64{}
	var evs []*clientv3.Event
	for _, kv := range resp.Kvs {
		if !v.ours(kv.Key) {
			continue
		}
		now[string(kv.Key)] = kv.ModRevision
		if was, ok := v.known[string(kv.Key)]; !ok || was != kv.ModRevision {
			evs = append(evs, &clientv3.Event{Type: clientv3.EventTypePut, Kv: kv})
		}
	}
	for _, key := range slices.Sorted(maps.Keys(v.known)) {
		if _, ok := now[key]; !ok {
			evs = append(evs, &clientv3.Event{Type: clientv3.EventTypeDelete, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: rev}})
		}
	}
	v.known, v.next = now, rev+1
	return clientv3.WatchResponse{Header: *resp.Header, Events: evs}, true
}

// stoppedWatcher is a Watcher whose Watch, on a closed client, waits
// until the provider has stopped (or ctx ends) before it returns the
// closed client's watch channel, which is closed at once. The pinned
// provider watches again whenever a watch ends, until it is shut down:
// on a closed client, whose watches end at once, it would spin. Its
// watches of the members are this cluster's, and go on where the
// provider's view ended (see membersView).
type stoppedWatcher struct {
	clientv3.Watcher
	client  context.Context // the client's: ends when it closes
	stopped <-chan struct{}
	view    *membersView
}

func (w stoppedWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	members := key == w.view.key
	if members {
		if rev := w.view.from(); rev > 0 {
			opts = append(slices.Clip(opts), clientv3.WithRev(rev))
		}
		key = w.view.prefix()
	}
	if w.client.Err() != nil {
		select {
		case <-w.stopped:
		case <-ctx.Done():
		}
	}
	src := w.Watcher.Watch(ctx, key, opts...)
	if !members {
		return src
	}
	return w.view.relay(ctx, src)
}

// rereadRetry is how long relay waits before it lets a watch fail when it
// could not read the members again (the provider then watches again).
const rereadRetry = time.Second

// relay passes src's responses on, keeping track of what the provider was
// told (see membersView), with this cluster's events only, one each. The
// pinned provider applies a response's deletions only to members it had
// before the response, and its puts after: a member that registered and
// left within one response (certain when a watch replays what happened
// since the read) stayed in its view for good. One event at a time, the
// put is applied before the delete. A watch that failed because etcd has
// compacted the revision it started from is not passed on: the members
// are read again, the provider told what changed, and the watch ends (the
// provider watches again, after that read).
func (v *membersView) relay(ctx context.Context, src clientv3.WatchChan) clientv3.WatchChan {
	out := make(chan clientv3.WatchResponse)
	go func() {
		defer close(out)
		send := func(r clientv3.WatchResponse) bool {
			select {
			case out <- r:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for resp := range src {
			if resp.CompactRevision != 0 {
				if r, ok := v.reread(ctx); ok {
					if len(r.Events) > 0 && !send(r) {
						return
					}
					continue // src ends: the provider watches again
				}
				t := time.NewTimer(rereadRetry)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
				}
			}
			if resp.Err() != nil || len(resp.Events) == 0 {
				if !send(resp) {
					return
				}
				continue
			}
			for _, ev := range resp.Events {
				if !v.ours(ev.Kv.Key) {
					continue
				}
				r := resp
				r.Events = []*clientv3.Event{ev}
				if !send(r) {
					return
				}
				v.told(ev)
			}
			v.toldUpTo(resp.Events[len(resp.Events)-1].Kv.ModRevision)
		}
	}()
	return out
}
