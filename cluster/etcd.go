package cluster

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	pacluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultEtcdKey is the etcd key prefix under which [Etcd] registers
// members when baseKey is empty.
const DefaultEtcdKey = "/polyweave"

// DefaultEtcdTimeout bounds the etcd provider's start and shutdown unless
// [EtcdTimeout] says otherwise.
const DefaultEtcdTimeout = 10 * time.Second

// ErrEtcdUnreachable is the cause of the error [Start] returns when the
// etcd provider could not reach etcd within its timeout (see
// [EtcdTimeout]), and of the provider's shutdown error when it could not
// deregister in time.
var ErrEtcdUnreachable = errors.New("etcd unreachable")

// EtcdOption configures [Etcd].
type EtcdOption func(*etcdProvider)

// EtcdTimeout bounds the etcd provider's exchanges with etcd when the
// member starts (reading the members, registering this one) and when it
// closes (deregistering). When etcd does not answer within d, the
// provider gives up: it closes its connection, and Start (or Close)
// returns an error wrapping ErrEtcdUnreachable that names the endpoints.
// d zero or negative means DefaultEtcdTimeout.
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
// provider.
//
// The provider connects to etcd when the member starts (after protoactor
// has set up gRPC, whose global logger it replaces then), and closes that
// connection when the member closes; a provider that is not used holds
// nothing. The pinned provider's keep-alive goroutine may sleep for up to
// a second after the member has closed before it ends.
//
// An etcd that cannot be reached does not hang the member: its start and
// its shutdown are bounded (DefaultEtcdTimeout, or [EtcdTimeout]).
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
	e := &etcdProvider{baseKey: baseKey, timeout: DefaultEtcdTimeout,
		cfg: clientv3.Config{Endpoints: slices.Clone(endpoints), DialTimeout: 5 * time.Second}}
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
	timeout time.Duration // of a start or a shutdown

	mu     sync.Mutex
	p      *etcd.Provider // once started
	client *clientv3.Client
	used   bool
	closed bool
}

func (e *etcdProvider) StartMember(c *pacluster.Cluster) error {
	p, err := e.start()
	if err != nil {
		return err
	}
	return e.bounded("register with", func() error { return p.StartMember(c) })
}

func (e *etcdProvider) StartClient(c *pacluster.Cluster) error {
	p, err := e.start()
	if err != nil {
		return err
	}
	return e.bounded("read the members from", func() error { return p.StartClient(c) })
}

// bounded runs fn, an exchange of the pinned provider with etcd (whose
// requests have no deadline: they wait for etcd forever), for up to
// e.timeout. When that passes, it closes the etcd client, which fails
// fn's pending requests, waits for fn to return, and returns an error
// wrapping ErrEtcdUnreachable; the provider is of no further use. A panic
// of fn is returned as an error.
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
	_ = e.client.Close() // fails fn's pending requests
	err := <-done
	return fmt.Errorf("cluster: etcd provider: %s etcd at %s: %w: no answer within %v (then: %v)", what, where, ErrEtcdUnreachable, e.timeout, err)
}

func (e *etcdProvider) start() (*etcd.Provider, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.used {
		return nil, errors.New("cluster: etcd provider: already used by a member; give each Start its own")
	}
	e.used = true
	p, err := etcd.NewWithConfig(e.baseKey, e.cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster: etcd provider: %w", err)
	}
	// The pinned provider keeps its client in an unexported field, and
	// there is no other way to reach it (Etcd checked that it is there).
	f := reflect.ValueOf(p).Elem().FieldByName("client")
	e.p, e.client = p, *(**clientv3.Client)(unsafe.Pointer(f.UnsafeAddr()))
	return p, nil
}

// Shutdown deregisters the member (when it had started), stops watching
// and closes the etcd client, which ends the lease's keep-alive. It gives
// up deregistering after the provider's timeout (the lease then expires).
func (e *etcdProvider) Shutdown(graceful bool) (err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.p == nil || e.closed {
		return nil
	}
	e.closed = true
	defer func() {
		// Also when the pinned Shutdown failed or timed out.
		if cerr := e.client.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close etcd client: %w", cerr)
		}
	}()
	return e.bounded("deregister from", func() error { return e.p.Shutdown(graceful) })
}
