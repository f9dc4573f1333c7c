package cluster

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
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
// its lease expires (about three seconds). Give each process (each
// [Start]) its own provider.
//
// The provider holds an etcd client from the start. The member that
// [Start] joins with it closes that client when it closes (and a Start
// that fails closes it too); the provider cannot be used again after
// that. The pinned provider's keep-alive goroutine may sleep for up to a
// second after the member has closed before it ends.
func Etcd(endpoints []string, baseKey string) (pacluster.ClusterProvider, error) {
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("cluster: etcd provider: no endpoints")
	}
	if baseKey == "" {
		baseKey = DefaultEtcdKey
	}
	p, err := etcd.NewWithConfig(baseKey, clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("cluster: etcd provider: %w", err)
	}
	client, err := etcdClient(p)
	if err != nil {
		return nil, fmt.Errorf("cluster: etcd provider: %w", err)
	}
	return &etcdProvider{Provider: p, client: client}, nil
}

// etcdClient returns the etcd client that the pinned provider made and
// never closes: it keeps it in an unexported field, and there is no other
// way to give it one, or to reach it. A protoactor whose provider no
// longer has that field fails here, at once, rather than leaking.
func etcdClient(p *etcd.Provider) (*clientv3.Client, error) {
	f := reflect.ValueOf(p).Elem().FieldByName("client")
	if !f.IsValid() || f.Type() != reflect.TypeFor[*clientv3.Client]() {
		return nil, errors.New("the protoactor etcd provider has no client field to close: update cluster.Etcd for this protoactor")
	}
	c := *(**clientv3.Client)(unsafe.Pointer(f.UnsafeAddr()))
	if c == nil {
		return nil, errors.New("the protoactor etcd provider has no client")
	}
	return c, nil
}

// etcdProvider is the pinned etcd provider, whose etcd client is closed
// when the member is done with it.
type etcdProvider struct {
	*etcd.Provider
	client  *clientv3.Client
	started atomic.Bool

	closeOnce sync.Once
	closeErr  error
}

func (p *etcdProvider) StartMember(c *pacluster.Cluster) error {
	p.started.Store(true)
	return p.Provider.StartMember(c)
}

func (p *etcdProvider) StartClient(c *pacluster.Cluster) error {
	p.started.Store(true)
	return p.Provider.StartClient(c)
}

// Shutdown deregisters the member (when it had started), stops watching
// and closes the etcd client, which ends the lease's keep-alive.
func (p *etcdProvider) Shutdown(graceful bool) (err error) {
	defer func() {
		if cerr := p.close(); err == nil {
			err = cerr
		}
	}()
	if !p.started.Load() {
		return nil
	}
	return p.Provider.Shutdown(graceful)
}

func (p *etcdProvider) close() error {
	p.closeOnce.Do(func() {
		if err := p.client.Close(); err != nil {
			p.closeErr = fmt.Errorf("close etcd client: %w", err)
		}
	})
	return p.closeErr
}
