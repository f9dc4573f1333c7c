package cluster

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
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
func Etcd(endpoints []string, baseKey string) (pacluster.ClusterProvider, error) {
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("cluster: etcd provider: no endpoints")
	}
	if baseKey == "" {
		baseKey = DefaultEtcdKey
	}
	if f, ok := reflect.TypeFor[etcd.Provider]().FieldByName("client"); !ok || f.Type != reflect.TypeFor[*clientv3.Client]() {
		return nil, errors.New("cluster: etcd provider: protoactor's etcd provider has no client field to close: update cluster.Etcd for this protoactor")
	}
	return &etcdProvider{baseKey: baseKey, cfg: clientv3.Config{Endpoints: slices.Clone(endpoints), DialTimeout: 5 * time.Second}}, nil
}

// etcdProvider starts the pinned etcd provider, and its etcd client, when
// the member starts, and closes the client when the member is done with
// it: the pinned provider never does.
type etcdProvider struct {
	baseKey string
	cfg     clientv3.Config

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
	return p.StartMember(c)
}

func (e *etcdProvider) StartClient(c *pacluster.Cluster) error {
	p, err := e.start()
	if err != nil {
		return err
	}
	return p.StartClient(c)
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
// and closes the etcd client, which ends the lease's keep-alive.
func (e *etcdProvider) Shutdown(graceful bool) (err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.p == nil || e.closed {
		return nil
	}
	e.closed = true
	defer func() {
		// Also when the pinned Shutdown panics (a member whose start
		// failed half-way): the caller recovers.
		if cerr := e.client.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close etcd client: %w", cerr)
		}
	}()
	return e.p.Shutdown(graceful)
}
