package cluster_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/polyweave/polyweave-go/cluster"
)

// TestEtcd_CompactedWhileNotWatchingReadsAgain: while member A is not
// watching the members (here: held between its read of them and its
// first watch; in production: a watch broken off for long), member
// "gone", which A read, leaves, member "joined" registers, and etcd
// compacts those changes away. A's watch, from the revision after its
// read, fails: A must read the members again rather than watch from
// "now", which kept "gone" in its view for good and never showed it
// "joined".
func TestEtcd_CompactedWhileNotWatchingReadsAgain(t *testing.T) {
	parallelLeakCheck(t)
	members := newEtcdMembers(t)
	cli := etcdClient(t, members.endpoint)
	const gone, joined = "127.0.0.1:1", "127.0.0.1:2"
	goneKey, _ := registerEtcdNode(t, cli, members.prefix, cluster.DefaultName, "gone", 1)
	a := members.spawn(t, childEtcdHoldEnv+"=1")
	nextMark(t, a, "read the members")
	registerEtcdNode(t, cli, members.prefix, cluster.DefaultName, "joined", 2)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	del, err := cli.Delete(ctx, goneKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, del.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	a.Send(t, "watch")
	addrA, _ := etcdReady(t, a)
	c, addrC, _ := members.start(t)
	if view := viewWith(t, a, addrC); slices.Contains(view, gone) || !slices.Contains(view, joined) {
		t.Errorf("A (%s) does not see that %s left and %s joined while it did not watch: %v", addrA, gone, joined, view)
	}
	c.Stop(t)
	a.Stop(t)
	checkRaceReports(t, filepath.Dir(members.raceLog))
}
