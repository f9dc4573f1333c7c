package cluster_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/cluster"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/tools/tooltest"
)

// childHostEnv, set (to 1), makes this test binary a cluster member
// (TestClusterHostChild), configured besides through childSchemaEnv and
// childSideEnv.
const childHostEnv = "POLYWEAVE_CLUSTER_HOST"

// childHoldEnv, when set, is the Hold of TestClusterHostChild's member
// (time.ParseDuration); it is 3 s otherwise.
const childHoldEnv = "POLYWEAVE_CLUSTER_HOLD"

// TestClusterHostChild is a cluster member's body; it does nothing unless
// started by startHostChild. It hosts one-call
// sessions; session t's call waits for a "release" line on its stdin, and
// the member marks "started t" when it begins. It marks "ready ADDRESS
// HEALTH" once it has joined (HEALTH: the host:port of its health
// checks, on a port it bound itself); a line "stale ADDRESS ID…" makes it send the
// status of a session s that ended to the futures ID… at ADDRESS, as it
// would answer a request for s (it marks "sent N"). It leaves when its
// stdin closes.
func TestClusterHostChild(t *testing.T) {
	childMain(t, childHostEnv, runHostChild)
}

func runHostChild(t *testing.T, _ string) error {
	hold := 3 * time.Second
	if v := os.Getenv(childHoldEnv); v != "" {
		var err error
		if hold, err = time.ParseDuration(v); err != nil {
			return err
		}
	}
	provider, health := loneProviderAt(t)
	mark := tooltest.Marker()
	release := make(chan struct{})
	var once sync.Once
	m, err := cluster.Start(&cluster.Options{
		Provider: provider,
		Store:    openStore(t, os.Getenv(childSchemaEnv)),
		Session: sessionFunc(t, 1, sideFile(os.Getenv(childSideEnv)), func(id string) hooks {
			if id != "t" {
				return hooks{}
			}
			return hooks{before: func(ctx context.Context, _ string) {
				once.Do(func() { mark("started t") })
				select {
				case <-release:
				case <-ctx.Done():
				}
			}}
		}),
		// Long enough that t's run request is pending while the stale
		// answers arrive.
		Hold: hold,
	})
	if err != nil {
		return err
	}
	mark("ready %s %s", m.Address(), health)
	stale, err := json.Marshal(map[string]any{"state": "done", "text": "the stale answer of s", "member": m.Address(), "epoch": 1})
	if err != nil {
		return err
	}
	frame := &messages.Frame{Type: messages.FrameType_META, StreamId: "s", Name: "polyweave.session.status", Payload: stale}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) == 1 && fields[0] == "release":
			close(release)
		case len(fields) > 2 && fields[0] == "stale":
			for _, id := range fields[2:] {
				m.System().Root.Send(actor.NewPID(fields[1], id), frame)
			}
			mark("sent %d", len(fields)-2)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return m.Close(ctx)
}

// hostChild is a member in a child process (TestClusterHostChild) on a
// fresh schema of the store, whose calls append to side, and whose race
// detector writes its reports under raceLog.
type hostChild struct {
	*tooltest.Child
	schema  string
	side    sideFile
	raceLog string
	health  string // host:port of its health checks
	address string // the member's, once it is ready
}

// startHostChild starts a hostChild, with env added to its environment,
// and returns it once it is ready.
func startHostChild(t *testing.T, env ...string) *hostChild {
	t.Helper()
	h := &hostChild{schema: freshSchema(), side: newSideFile(t), raceLog: filepath.Join(t.TempDir(), "race")}
	h.Child = tooltest.StartChild(t, "^TestClusterHostChild$", append(h.env(env...), childHostEnv+"=1")...)
	h.address, h.health = readyMark(t, h.Child, "member")
	return h
}

// env is the environment of a child process that joins h's cluster: h's
// schema, side file and race log, and the store's server.
func (h *hostChild) env(more ...string) []string {
	return append([]string{childSchemaEnv + "=" + h.schema, childSideEnv + "=" + string(h.side),
		"POLYWEAVE_TEST_POSTGRES=" + dsn, "GORACE=exitcode=0 log_path=" + h.raceLog}, more...)
}

// stop stops h, and fails t for the data races in this module's code that
// h, or another child process of h's env, hit.
func (h *hostChild) stop(t *testing.T) {
	t.Helper()
	h.Stop(t)
	checkRaceReports(t, filepath.Dir(h.raceLog))
}

// childClientEnv makes this test binary a cluster client at the address
// it holds (TestClusterClientChild), configured besides through
// childHostsEnv and childSchemaEnv.
const childClientEnv = "POLYWEAVE_CLUSTER_CLIENT"

// TestClusterClientChild is a cluster client's body; it does nothing
// unless started by TestMember_RestartedAtSameAddress. It marks "ready
// ID" (its member id) once it has joined, or "in use ERROR" when another
// process holds its address (and exits), then takes commands on its
// stdin: "run ID" runs session ID in the background and marks "ran ID
// EPOCH TEXT" (or "error ID ERROR"); "futures" marks "futures ID…", the
// ids of its pending futures. It leaves when its stdin closes.
func TestClusterClientChild(t *testing.T) {
	childMain(t, childClientEnv, runClientChild)
}

func runClientChild(t *testing.T, address string) error {
	mark := tooltest.Marker()
	c, err := cluster.Start(&cluster.Options{
		Client: true, Address: address,
		Provider: cluster.Automanaged(0, strings.Split(os.Getenv(childHostsEnv), ","), 100*time.Millisecond),
		Store:    openStore(t, os.Getenv(childSchemaEnv)),
		Hold:     3 * time.Second,
	})
	if err != nil && strings.Contains(err.Error(), "address already in use") {
		// Another process took the port: the parent tries another.
		mark("in use %v", err)
		return nil
	}
	if err != nil {
		return err
	}
	mark("ready %s", c.System().ID)
	var runs sync.WaitGroup
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		switch cmd := sc.Text(); {
		case cmd == "futures":
			mark("futures %s", strings.Join(pendingFutures(c.System()), " "))
		case strings.HasPrefix(cmd, "run "):
			id := strings.TrimPrefix(cmd, "run ")
			runs.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				res, err := c.Run(ctx, id, firstRequest(id)...)
				if err != nil {
					mark("error %s %v", id, err)
					return
				}
				mark("ran %s %d %s", id, res.Epoch, res.Text)
			})
		}
	}
	runs.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.Close(ctx)
}

// A process restarted at the address of an earlier one (a member or
// client that restarts on its port, under a new member id) names its
// futures as the earlier process did: "future$1", "future$2", … So an
// answer meant for a request of the earlier process, sent late by a
// session elsewhere (at the end of its hold, or when it finishes),
// reaches whichever request of the new process has that name: the status
// of another session, or an activation of another session.
//
// TestMember_RestartedAtSameAddress runs a member and a client in child
// processes. The client runs session s, then restarts at the same address
// (a new process, under a new member id) and runs session t while t waits
// in a tool call on the member. Every future the new process has pending
// then gets, from the member, the status of session s as it would have
// been answered to the earlier process. Run must not take it for t's: it
// asks again, and returns t's own answer once t ends. (Every process of
// the test is a child: a protoactor remote that starts replaces gRPC's
// global logger, racing with the gRPC goroutines of any other in the
// process.)
//
// The client's port is found free, and the client's remote binds it
// itself, as protoactor does, so nothing holds it for the client
// meanwhile: another process may take it before the first client
// listens, or between the two. The scenario then starts again, from a
// new member, on another port.
func TestMember_RestartedAtSameAddress(t *testing.T) {
	parallelLeakCheck(t)
	for attempt := 1; !restartedAtSameAddress(t); attempt++ {
		if attempt == 3 {
			t.Fatal("three ports found free were taken by other processes before the clients could listen on them")
		}
		t.Log("the client's port was taken by another process: starting again on another")
	}
}

// restartedAtSameAddress is TestMember_RestartedAtSameAddress on a port
// found free; it returns false, with every child it started stopped,
// when a client could not listen on it because another process held it.
func restartedAtSameAddress(t *testing.T) bool {
	t.Helper()
	host := startHostChild(t)
	address := fmt.Sprintf("127.0.0.1:%d", stablePorts(t, 1)[0]) // the client's, restarted
	startClient := func() (*tooltest.Child, string, bool) {
		t.Helper()
		c := tooltest.StartChild(t, "^TestClusterClientChild$", host.env(childClientEnv+"="+address, childHostsEnv+"="+host.health)...)
		m := c.Mark(t)
		if strings.HasPrefix(m, "in use ") {
			c.Stop(t)
			return nil, "", false
		}
		id, ok := strings.CutPrefix(m, "ready ")
		if !ok {
			t.Fatalf("client: mark %q; want it ready", m)
		}
		return c, id, true
	}
	// ran returns the text of session id's answer, as c marks it.
	ran := func(c *tooltest.Child, id string) string {
		t.Helper()
		m := c.Mark(t)
		text, ok := strings.CutPrefix(m, "ran "+id+" 1 ")
		if !ok {
			t.Fatalf("session %s: %s; want its answer at epoch 1", id, m)
		}
		return text
	}

	first, firstID, ok := startClient()
	if !ok {
		host.stop(t)
		return false
	}
	first.Send(t, "run s")
	if text := ran(first, "s"); text != "All done." {
		t.Fatalf("session s from the first client answered %q", text)
	}
	first.Stop(t)
	second, secondID, ok := startClient()
	if !ok {
		host.stop(t)
		return false
	}
	if secondID == firstID {
		t.Fatalf("the restarted client has the first one's id %s", firstID)
	}

	second.Send(t, "run t")
	if m := host.Mark(t); m != "started t" { // t's request is pending
		t.Fatalf("member: mark %q, want \"started t\"", m)
	}
	second.Send(t, "futures")
	futures, ok := strings.CutPrefix(second.Mark(t), "futures ")
	if !ok || futures == "" {
		t.Fatalf("the restarted client has no request pending: %q", futures)
	}
	host.Send(t, "stale "+address+" "+futures)
	if m := host.Mark(t); !strings.HasPrefix(m, "sent ") {
		t.Fatalf("member: mark %q", m)
	}
	// The stale answers cross the connection before t's own.
	host.Send(t, "release")
	if text := ran(second, "t"); text != "All done." {
		t.Errorf("session t from the restarted client answered %q, want its own answer \"All done.\"", text)
	}
	second.Stop(t)
	host.stop(t)
	if got := host.side.runs(t); len(got) != 2 || got["s c1"] != 1 || got["t c1"] != 1 {
		t.Errorf("side effects %v, want s c1 and t c1 once each", got)
	}
	return true
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
	m := startLoneMember(t, &cluster.Options{
		Store:   store,
		Session: sessionFunc(t, 1, side, nil),
	})
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

// TestMember_MovedAnswerForgetsTheActivation: an incarnation that answers
// "moved" (here: fenced by a newer claim) stops; a Run on another member
// forgets it and asks the session's owner for a new activation with its
// next request, rather than sending that request to the stopped one (a
// dead letter: a request lost, and a round trip). The member is a child
// process; this process is a client, whose Run is observed.
func TestMember_MovedAnswerForgetsTheActivation(t *testing.T) {
	leakCheck(t)
	// No "running" answer while the test works: every request is
	// answered once, when the incarnation ends.
	host := startHostChild(t, childHoldEnv+"=10m")
	store := openStore(t, host.schema)
	client, err := cluster.Start(&cluster.Options{Client: true, Store: store,
		Provider: cluster.Automanaged(0, []string{host.health}, 100*time.Millisecond),
		Hold:     10 * time.Minute, RequestTimeout: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := client.Close(ctx); err != nil {
			t.Errorf("close client: %v", err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Once s ran, the client knows the member: t's first request is
	// delivered.
	if _, err := client.Run(ctx, "s", firstRequest("s")...); err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		res *cluster.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := client.Run(ctx, "t", firstRequest("t")...)
		done <- outcome{res, err}
	}()
	if m := host.Mark(t); m != "started t" {
		t.Fatalf("member: mark %q, want \"started t\"", m)
	}
	// A newer incarnation elsewhere takes the session over and ends it;
	// the member's incarnation is fenced when its call returns.
	if state, text, epoch := cluster.RunIncarnation(ctx, newRuntime(t), store, sessionFunc(t, 1, host.side, nil), "t", firstRequest("t")...); state != "done" || epoch != 2 {
		t.Fatalf("newer incarnation: %s %q epoch %d, want done at epoch 2", state, text, epoch)
	}
	host.Send(t, "release")
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	if o.res.Epoch != 3 || o.res.Requests != 2 {
		t.Errorf("Run: epoch %d after %d requests, want epoch 3 (a new activation, answering from the store) after 2: the one answered \"moved\", then the new activation's", o.res.Epoch, o.res.Requests)
	}
	host.stop(t)
}
