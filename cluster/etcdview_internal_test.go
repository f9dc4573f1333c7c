package cluster

import (
	"context"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// scriptedWatcher is a Watcher whose watches the test answers: each
// Watch is handed to the test on watches, with the key and the revision
// it starts from.
type scriptedWatcher struct {
	clientv3.Watcher // nil: only Watch is called
	watches          chan scriptedWatch
}

type scriptedWatch struct {
	key  string
	rev  int64 // 0: from now
	resp chan clientv3.WatchResponse
}

func (w scriptedWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	sw := scriptedWatch{key: key, rev: clientv3.OpGet(key, opts...).Rev(), resp: make(chan clientv3.WatchResponse)}
	w.watches <- sw
	return sw.resp
}

func putEvent(key string, rev int64) *clientv3.Event {
	return &clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: rev}}
}

// TestMembersView_EveryWatchGoesOnWhereTheLastEnded: the pinned etcd
// provider watches again, from "now", whenever a watch of the members
// ends: whatever changed in between was lost for good. Every watch, not
// only the first, starts after the last change the provider was told of,
// and only this cluster's members (keys BASE/NAME/ID) reach the provider.
func TestMembersView_EveryWatchGoesOnWhereTheLastEnded(t *testing.T) {
	v := &membersView{key: "/base/pw"}
	w := stoppedWatcher{Watcher: scriptedWatcher{watches: make(chan scriptedWatch, 1)}, client: t.Context(), view: v}
	read := &clientv3.GetResponse{Header: &pb.ResponseHeader{Revision: 10}, Kvs: []*mvccpb.KeyValue{
		{Key: []byte("/base/pw/pw@a"), ModRevision: 3}, {Key: []byte("/base/pw-staging/pw-staging@b"), ModRevision: 4},
	}}
	v.took(read)
	if len(read.Kvs) != 1 || string(read.Kvs[0].Key) != "/base/pw/pw@a" {
		t.Fatalf("the provider read %v, want /base/pw/pw@a alone", read.Kvs)
	}
	watch := func(want int64) (clientv3.WatchChan, scriptedWatch) {
		t.Helper()
		ch := w.Watch(t.Context(), "/base/pw", clientv3.WithPrefix())
		sw := <-w.Watcher.(scriptedWatcher).watches
		if sw.key != "/base/pw/" || sw.rev != want {
			t.Fatalf("watch of %q from revision %d, want %q from %d", sw.key, sw.rev, "/base/pw/", want)
		}
		return ch, sw
	}
	ch, sw := watch(11) // right after the read
	sw.resp <- clientv3.WatchResponse{Header: pb.ResponseHeader{Revision: 13}, Events: []*clientv3.Event{
		putEvent("/base/pw/pw@c", 12), putEvent("/base/pw/nested/pw@d", 13),
	}}
	if got := <-ch; len(got.Events) != 1 || string(got.Events[0].Kv.Key) != "/base/pw/pw@c" {
		t.Fatalf("the provider was told %v, want the put of /base/pw/pw@c alone", got.Events)
	}
	sw.resp <- clientv3.WatchResponse{Canceled: true} // the watch fails
	if got := <-ch; got.Err() == nil {
		t.Fatal("the failed watch's response was not passed on")
	}
	close(sw.resp)
	if _, ok := <-ch; ok {
		t.Fatal("the provider's watch did not end with its source")
	}
	ch, sw = watch(14) // after the last change seen, not from now
	close(sw.resp)
	<-ch
}
