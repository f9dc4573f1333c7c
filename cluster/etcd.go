package cluster

import (
	"fmt"
	"time"

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
// its lease expires (about three seconds). Give each process its own
// provider.
//
// The pinned provider never closes its etcd client: a process that
// leaves the cluster keeps that connection (and its goroutines) until it
// exits.
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
	return p, nil
}
