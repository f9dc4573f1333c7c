package cluster_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/polyweave/polyweave-go/cluster"
	"github.com/polyweave/polyweave-go/tools/tooltest"
)

// etcdClient returns a client of the etcd at endpoint, closed when the
// test ends.
func etcdClient(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// registerEtcdNode registers, as the etcd provider does, a member of
// cluster name under prefix, with id, at 127.0.0.1:port (nothing
// listens there), and returns its key and the revision of its put.
func registerEtcdNode(t *testing.T, cli *clientv3.Client, prefix, name, id string, port int) (key string, rev int64) {
	t.Helper()
	node := name + "@" + id
	data, err := etcd.NewNode(node, "127.0.0.1", port, []string{cluster.Kind}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	key = prefix + "/" + name + "/" + node
	resp, err := cli.Put(ctx, key, string(data))
	if err != nil {
		t.Fatal(err)
	}
	return key, resp.Header.Revision
}

// viewWith returns the first view of the members that member c marks
// (its "topology" marks) with addr in it.
func viewWith(t *testing.T, c *tooltest.Child, addr string) []string {
	t.Helper()
	for {
		if view := strings.Split(nextMark(t, c, "topology "), ","); slices.Contains(view, addr) {
			return view
		}
	}
}

// TestEtcd_OtherClusterNotInView: two clusters share an etcd and a base
// key, one named cluster.DefaultName ("polyweave"), the other
// "polyweave-staging". A member of the first sees only its own cluster's
// members, in its read of them at its start and in its watch: the prefix
// BASE/polyweave (with no trailing "/") also holds BASE/polyweave-staging,
// whose members were taken for this cluster's (sessions placed on them).
func TestEtcd_OtherClusterNotInView(t *testing.T) {
	parallelLeakCheck(t)
	members := newEtcdMembers(t)
	cli := etcdClient(t, members.endpoint)
	const other = cluster.DefaultName + "-staging"
	const before, after = "127.0.0.1:1", "127.0.0.1:2"
	registerEtcdNode(t, cli, members.prefix, other, "before", 1) // read by A at its start
	a, addrA, _ := members.start(t)
	registerEtcdNode(t, cli, members.prefix, other, "after", 2) // watched by A
	b, addrB, _ := members.start(t)
	view := viewWith(t, a, addrB)
	for _, foreign := range []string{before, after} {
		if slices.Contains(view, foreign) {
			t.Errorf("A (%s, cluster %q) has %s, a member of cluster %q, in its view: %v", addrA, cluster.DefaultName, foreign, other, view)
		}
	}
	b.Stop(t)
	a.Stop(t)
	checkRaceReports(t, filepath.Dir(members.raceLog))
}

// TestEtcd_NameWithSlashRefused: a cluster name with a "/" is refused by
// Start with the etcd provider, before anything starts: the provider
// names a member by the last "/"-separated segment of its key, so the
// members it read at its start would never leave its view.
func TestEtcd_NameWithSlashRefused(t *testing.T) {
	leakCheck(t)
	provider, err := cluster.Etcd([]string{"127.0.0.1:1"}, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = cluster.Start(&cluster.Options{Provider: provider, Name: "team/polyweave"})
	if err == nil || !strings.Contains(err.Error(), `"team/polyweave"`) || !strings.Contains(err.Error(), `"/"`) {
		t.Fatalf("Start with cluster name %q: %v, want an error that refuses its \"/\"", "team/polyweave", err)
	}
}
