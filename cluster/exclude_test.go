package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"

	"github.com/polyweave/polyweave-go/cluster"
)

// healthRelay stands between an automanaged member and its own health
// checks: it passes them on to the member's health port (the last one
// set), or, while cut,
// answers for a member of another cluster, as if the member had
// vanished from the network (the provider, still answered, drops it).
type healthRelay struct {
	srv  *httptest.Server
	cut  atomic.Bool
	port atomic.Int64 // the member's health port
}

func newHealthRelay(t *testing.T) *healthRelay {
	t.Helper()
	r := &healthRelay{}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r.cut.Load() {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(automanaged.NewNode("another-cluster", "stranger", "127.0.0.1", 1, 1, nil))
			return
		}
		resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d%s", r.port.Load(), req.URL.Path))
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
// its host can start a new member in its place, at the same address,
// without closing the excluded one first; the new member, under a new
// id, is counted and runs sessions.
func TestMember_ExcludedMemberLeavesForANewOne(t *testing.T) {
	leakCheck(t)
	store := openStore(t, freshSchema())
	side := newSideFile(t)
	relay := newHealthRelay(t)
	opts := func(address string) *cluster.Options {
		l, port := healthListener(t)
		relay.port.Store(int64(port))
		return &cluster.Options{
			Address:  address,
			Provider: cluster.Automanaged(port, []string{relay.host()}, 50*time.Millisecond, cluster.HealthListener(l)),
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

	// The excluded member has left: its address is free for the member
	// that replaces it.
	address := old.Address()
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

// TestAutomanaged_HealthListenerOnAnotherPort: a HealthListener whose
// port is not the one Automanaged was given fails Start with an error
// that names both, and leaves nothing running.
func TestAutomanaged_HealthListenerOnAnotherPort(t *testing.T) {
	leakCheck(t)
	l, port := healthListener(t)
	other := port + 1
	if other > 65535 {
		other = port - 1
	}
	m, err := cluster.Start(&cluster.Options{
		Provider: cluster.Automanaged(other, []string{l.Addr().String()}, 100*time.Millisecond, cluster.HealthListener(l)),
		Store:    openStore(t, freshSchema()), Session: sessionFunc(t, 1, newSideFile(t), nil),
	})
	if err == nil {
		m.Close(context.Background())
		t.Fatal("Start with a HealthListener on another port than Automanaged's succeeded")
	}
	if want := fmt.Sprintf("HealthListener listens on port %d, but Automanaged was given port %d", port, other); !strings.Contains(err.Error(), want) {
		t.Fatalf("Start: %v; want an error saying %q", err, want)
	}
}
