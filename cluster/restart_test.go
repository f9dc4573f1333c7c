package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/cluster"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// A process restarted at the address of an earlier one (a member that
// restarts on its port, under a new member id) names its futures as the
// earlier process did: "future$1", "future$2", … So an answer meant for
// a request of the earlier process, sent late by a session elsewhere (at
// the end of its hold, or when it finishes), reaches whichever request of
// the new process has that name: the status of another session, or an
// activation of another session.
//
// TestMember_RestartedAtSameAddress restarts a client at its address and
// runs session t from it while t waits in a tool call on the member; every
// future the new process has pending then gets, from the member, the
// status of session s as it would have been answered to the earlier
// process. Run must not take it for t's: it asks again, and returns t's
// own answer once t ends.
func TestMember_RestartedAtSameAddress(t *testing.T) {
	leakCheck(t)
	schema := freshSchema()
	side := newSideFile(t)
	ports := freePorts(t, 2)
	health := fmt.Sprintf("127.0.0.1:%d", ports[0])
	address := fmt.Sprintf("127.0.0.1:%d", ports[1])
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	host, err := cluster.Start(&cluster.Options{
		Provider: cluster.Automanaged(ports[0], []string{health}, 100*time.Millisecond),
		Store:    openStore(t, schema),
		Session: sessionFunc(t, 1, side, func(id string) hooks {
			if id != "t" {
				return hooks{}
			}
			return hooks{before: func(ctx context.Context, _ string) {
				once.Do(func() { close(started) })
				select {
				case <-release:
				case <-ctx.Done():
				}
			}}
		}),
		// Long enough that t's run request is pending while the stale
		// answers arrive.
		Hold: 3 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	closeMember := func(m *cluster.Member) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("close %s: %v", m.Address(), err)
		}
	}
	defer closeMember(host)
	startClient := func() *cluster.Member {
		t.Helper()
		c, err := cluster.Start(&cluster.Options{
			Client: true, Address: address,
			Provider: cluster.Automanaged(0, []string{health}, 100*time.Millisecond),
			Store:    openStore(t, schema),
			Hold:     3 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	first := startClient()
	if res, err := first.Run(ctx, "s", firstRequest("s")...); err != nil || res.Text != "All done." {
		t.Fatalf("session s from the first client: %+v, %v", res, err)
	}
	firstID := first.System().ID
	closeMember(first)
	second := startClient()
	defer closeMember(second)
	if second.Address() != address || second.System().ID == firstID {
		t.Fatalf("restarted client: %s, id %s; want %s under a new id (was %s)", second.Address(), second.System().ID, address, firstID)
	}

	type outcome struct {
		res *cluster.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := second.Run(ctx, "t", firstRequest("t")...)
		done <- outcome{res, err}
	}()
	select {
	case <-started:
	case o := <-done:
		t.Fatalf("session t ended before its call ran: %+v, %v", o.res, o.err)
	}
	stale, err := json.Marshal(map[string]any{"state": "done", "text": "the stale answer of s", "member": host.Address(), "epoch": 1})
	if err != nil {
		t.Fatal(err)
	}
	frame := &messages.Frame{Type: messages.FrameType_META, StreamId: "s", Name: "polyweave.session.status", Payload: stale}
	sent := 0
	for _, id := range pendingFutures(second.System()) {
		host.System().Root.Send(actor.NewPID(address, id), frame)
		sent++
	}
	if sent == 0 {
		t.Fatal("the restarted client has no request pending")
	}
	// The stale answers cross the wire before t's; whatever Run made of
	// them, it has done once t's own answer is in.
	close(release)
	o := <-done
	if o.err != nil || o.res.Text != "All done." || o.res.Epoch != 1 {
		t.Fatalf("session t from the restarted client: %+v, %v; want t's own answer \"All done.\" at epoch 1", o.res, o.err)
	}
	t.Logf("%d stale answers sent; t answered after %d requests", sent, o.res.Requests)
	if got := side.runs(t); len(got) != 2 || got["s c1"] != 1 || got["t c1"] != 1 {
		t.Errorf("side effects %v, want s c1 and t c1 once each", got)
	}
}

// pendingFutures returns the ids of sys's pending futures.
func pendingFutures(sys *actor.ActorSystem) []string {
	var out []string
	for _, bucket := range sys.ProcessRegistry.LocalPIDs.LocalPIDs {
		for _, id := range bucket.Keys() {
			if strings.HasPrefix(id, "future$") {
				out = append(out, id)
			}
		}
	}
	return out
}

// TestMember_SessionRefusesAnotherSessionsRequest: a run request for
// session t that reaches the activation of session u (an activation
// cached for the wrong identity) is answered in u's name, and neither
// session runs.
func TestMember_SessionRefusesAnotherSessionsRequest(t *testing.T) {
	leakCheck(t)
	store := openStore(t, freshSchema())
	side := newSideFile(t)
	port := freePorts(t, 1)[0]
	m, err := cluster.Start(&cluster.Options{
		Provider: cluster.Automanaged(port, []string{fmt.Sprintf("127.0.0.1:%d", port)}, 100*time.Millisecond),
		Store:    store,
		Session:  sessionFunc(t, 1, side, nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A session first: the member then knows it is in the cluster.
	if res, err := m.Run(ctx, "w", firstRequest("w")...); err != nil || res.Text != "All done." {
		t.Fatalf("session w: %+v, %v", res, err)
	}
	pid := m.Cluster().Get("u", cluster.Kind) // activated, not run
	if pid == nil {
		t.Fatal("no activation of u")
	}
	payload, err := json.Marshal(map[string]any{"params": []map[string]any{{"name": "messages", "value": json.RawMessage(`[{"role":"user","content":"hi"}]`)}}})
	if err != nil {
		t.Fatal(err)
	}
	req := &messages.Frame{Type: messages.FrameType_META, StreamId: "t", Name: "polyweave.session.run", Payload: payload}
	res, err := m.System().Root.RequestFuture(pid, req, 10*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	f, ok := res.(*messages.Frame)
	if !ok || f.GetStreamId() != "u" || !strings.Contains(string(f.GetPayload()), `"state":"moved"`) {
		t.Fatalf("answer %v, want u's status: moved", res)
	}
	for _, id := range []string{"t", "u"} {
		if _, ok, err := tools.ReadSession(ctx, store, id); err != nil || ok {
			t.Errorf("session %s is in the store (%v, %v): it ran", id, ok, err)
		}
	}
	if got := side.runs(t); len(got) != 1 || got["w c1"] != 1 {
		t.Errorf("side effects %v, want w c1 once", got)
	}
}
