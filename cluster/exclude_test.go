package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"

	"github.com/polyweave/polyweave-go/cluster"
)

// healthRelay stands between an automanaged member and its own health
// checks: it passes them on to the member's health port, or, while cut,
// answers for a member of another cluster, as if the member had
// vanished from the network (the provider, still answered, drops it).
type healthRelay struct {
	srv  *httptest.Server
	cut  atomic.Bool
	port int // the member's health port
}

func newHealthRelay(t *testing.T, port int) *healthRelay {
	t.Helper()
	r := &healthRelay{port: port}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r.cut.Load() {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(automanaged.NewNode("another-cluster", "stranger", "127.0.0.1", 1, 1, nil))
			return
		}
		resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d%s", r.port, req.URL.Path))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *healthRelay) host() string { return r.srv.Listener.Addr().String() }

// TestMember_ExcludedMemberLeavesForANewOne: a member that the cluster
// saw leave (here its health checks went to another cluster's member for
// a while, as in a partition) is never counted again under its id, even
// once it is reachable again. It says so and leaves: its Runs fail with
// ErrExcluded, and once its Excluded channel is closed it has stopped as
// Close stops it (its sessions, its health checks, its address), so that
// its host can start a new member in its place, at the same address and
// health port, without closing the excluded one first; the new member,
// under a new id, is counted and runs sessions.
func TestMember_ExcludedMemberLeavesForANewOne(t *testing.T) {
	leakCheck(t)
	store := openStore(t, freshSchema())
	side := newSideFile(t)
	port := freePorts(t, 1)[0]
	relay := newHealthRelay(t, port)
	opts := func(address string) *cluster.Options {
		return &cluster.Options{
			Address:  address,
			Provider: cluster.Automanaged(port, []string{relay.host()}, 50*time.Millisecond),
			Store:    store,
			Session:  sessionFunc(t, 1, side, nil),
			Hold:     200 * time.Millisecond,
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	old := startMember(t, opts(""))
	if _, err := old.Run(ctx, "s1", firstRequest("s1")...); err != nil {
		t.Fatalf("a session before the cut: %v", err)
	}

	relay.cut.Store(true)
	select {
	case <-old.Excluded():
	case <-ctx.Done():
		t.Fatal("the member that the cluster saw leave was not told it is excluded")
	}
	relay.cut.Store(false) // reachable again: still not counted under its id
	if _, err := old.Run(ctx, "s2", firstRequest("s2")...); !errors.Is(err, cluster.ErrExcluded) {
		t.Errorf("Run from the excluded member: %v, want an error wrapping ErrExcluded", err)
	}

	// The excluded member has left: its address and its health port are
	// free for the member that replaces it.
	address := old.Address()
	if c, err := net.Dial("tcp", address); err == nil {
		c.Close()
		t.Errorf("the excluded member still listens on %s", address)
	}
	m, err := cluster.Start(opts(address))
	if err != nil {
		t.Fatalf("a new member in place of the excluded one: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("close the new member: %v", err)
		}
	})
	res, err := m.Run(ctx, "s2", firstRequest("s2")...)
	if err != nil {
		t.Fatalf("a session on the new member: %v", err)
	}
	if res.Text != "All done." || res.Member != address {
		t.Errorf("a session on the new member: %+v, want \"All done.\" on %s", res, address)
	}
	if err := old.Close(ctx); err != nil {
		t.Errorf("close the excluded member, which has left: %v", err)
	}
}
