package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/polyweave/polyweave-go/cluster"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/tools/tooltest"
)

// The kill test runs members in child processes (this test binary again,
// running TestClusterMemberChild), configured through these variables.
const (
	childEnv       = "POLYWEAVE_CLUSTER_CHILD" // the member's health-check port, of reservedPorts
	childHostsEnv  = "POLYWEAVE_CLUSTER_HOSTS" // every member's host:port for health checks, comma-separated
	childSchemaEnv = "POLYWEAVE_CLUSTER_SCHEMA"
	childSideEnv   = "POLYWEAVE_CLUSTER_SIDE"
	childRoundsEnv = "POLYWEAVE_CLUSTER_ROUNDS"
	childGatesEnv  = "POLYWEAVE_CLUSTER_GATES"
)

// gateClass is the first key of the PostgreSQL advisory locks that gate
// the rounds of the kill test's sessions (the second is the round).
const gateClass = 7070

// progressChannel is the PostgreSQL notification channel on which each
// of the kill test's calls says it has done its work and reached its gate.
const progressChannel = "polyweave_kill_progress"

// Timing of the kill test's cluster: members poll each other's health
// every refresh; a session holds a request for hold, and a request left
// unanswered (its member died) is sent again after hold + timeout.
const (
	killRefresh = 200 * time.Millisecond
	killHold    = 300 * time.Millisecond
	killTimeout = time.Second
)

// TestClusterMemberChild is a cluster member's body; it does nothing
// unless started by TestCluster_KillMembers. It marks "ready ADDRESS" once
// it has joined, serves until its stdin closes (or it is killed), then
// leaves the cluster.
func TestClusterMemberChild(t *testing.T) {
	childMain(t, childEnv, runMemberChild)
}

func runMemberChild(t *testing.T, portText string) error {
	port, err := strconv.Atoi(portText)
	if err != nil {
		return err
	}
	rounds, err := strconv.Atoi(os.Getenv(childRoundsEnv))
	if err != nil {
		return err
	}
	gates, err := strconv.Atoi(os.Getenv(childGatesEnv))
	if err != nil {
		return err
	}
	ctx := context.Background()
	store := openStore(t, os.Getenv(childSchemaEnv))
	// The connections sessions wait on at the gates.
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return err
	}
	cfg.MaxConns = 64
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	// Round k's call, once it has appended its line, waits until the
	// parent opens gate min(k, gates): the parent kills members while
	// the sessions stand between two gates.
	gate := func(ctx context.Context, call string) {
		k, err := strconv.Atoi(strings.TrimPrefix(call, "c"))
		if err != nil {
			return
		}
		// Tell the parent a call has done its work (it times its kills
		// by these), then wait: held until the implicit transaction ends,
		// the lock is taken once the parent has released its exclusive
		// lock, and let go at once.
		_, _ = pool.Exec(ctx, "SELECT pg_notify($1, $2)", progressChannel, call)
		_, _ = pool.Exec(ctx, "SELECT pg_advisory_xact_lock_shared($1, $2)", gateClass, min(k, gates))
	}
	work := func(ctx context.Context, _ string) {
		// The call's own work, of varying length.
		t := time.NewTimer(time.Duration(rand.IntN(30)) * time.Millisecond)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	side := sideFile(os.Getenv(childSideEnv))
	var logger *slog.Logger
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	health, err := listenReserved(port)
	if err != nil {
		return err
	}
	m, err := cluster.Start(&cluster.Options{
		Address:        "127.0.0.1:0",
		Provider:       cluster.Automanaged(port, strings.Split(os.Getenv(childHostsEnv), ","), killRefresh, cluster.HealthListener(health)),
		Store:          store,
		Session:        sessionFunc(t, rounds, side, func(string) hooks { return hooks{before: work, after: gate} }),
		Hold:           killHold,
		RequestTimeout: killTimeout,
		Logger:         logger,
	})
	if err != nil {
		return err
	}
	tooltest.Marker()("ready %s", m.Address())
	io.Copy(io.Discard, os.Stdin) // until the parent is done with us
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return m.Close(cctx)
}

// childKillClientEnv makes this test binary the kill test's client
// (TestClusterKillClientChild): the number of sessions it runs.
const childKillClientEnv = "POLYWEAVE_CLUSTER_KILL_CLIENT"

// TestClusterKillClientChild is the kill test's client; it does nothing
// unless started by TestCluster_KillMembers. It joins the cluster of the
// members at childHostsEnv as a client, marks "ready", runs sessions
// s00, s01, … at once, marks "ran ID EPOCH TEXT" (or "error ID ERROR")
// as each ends, then leaves.
func TestClusterKillClientChild(t *testing.T) {
	childMain(t, childKillClientEnv, func(t *testing.T, n string) error {
		sessions, err := strconv.Atoi(n)
		if err != nil {
			return err
		}
		client, err := cluster.Start(&cluster.Options{
			Client:         true,
			Provider:       cluster.Automanaged(0, strings.Split(os.Getenv(childHostsEnv), ","), killRefresh),
			Store:          openStore(t, os.Getenv(childSchemaEnv)),
			Hold:           killHold,
			RequestTimeout: killTimeout,
		})
		if err != nil {
			return err
		}
		mark := tooltest.Marker()
		mark("ready")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		var wg sync.WaitGroup
		for i := range sessions {
			wg.Go(func() {
				id := fmt.Sprintf("s%02d", i)
				res, err := client.Run(ctx, id, firstRequest(id)...)
				if err != nil {
					mark("error %s %v", id, err)
					return
				}
				mark("ran %s %d %s", id, res.Epoch, res.Text)
			})
		}
		wg.Wait()
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer ccancel()
		return client.Close(cctx)
	})
}

// TestCluster_KillMembers runs 24 durable sessions on a three-member
// cluster on loopback (members in child processes, the automanaged
// provider, the store on PostgreSQL) from a client process, and kills a
// member with SIGKILL 10 times at random moments, starting a new one in
// its place each time. Every session's tool calls append a line to one
// file, shared by all processes, then notify the test and wait at a gate
// (a PostgreSQL advisory lock) that the test opens round by round; each
// kill follows a random number of those notifications, so it finds calls
// that have appended their line but whose result is not stored. At the end every session has completed
// with its final answer; no call ran twice (each line is in the file at
// most once); every call whose result was stored as a success appended
// its line exactly once; the sessions of killed members were taken over
// by another member (their claim epochs count the activations).
//
// Under the race detector it runs 20 sessions and 8 kills, with the same
// checks: the members' goroutines run several times slower there. (Its
// cost grows with sessions × kills: every session makes a call per kill,
// and each kill starts a process. 50 sessions and 20 kills took 75 s of
// CPU, and over two minutes on a loaded machine.)
func TestCluster_KillMembers(t *testing.T) {
	parallelLeakCheck(t)
	const members = 3
	sessions, kills := 24, 10
	if raceDetector {
		sessions, kills = 20, 8
	}
	rounds := kills + 4
	schema := freshSchema()
	side := newSideFile(t)
	raceLog := filepath.Join(t.TempDir(), "race")
	ports := reservedPorts(t, members) // a killed member's replacement takes its port
	hosts := make([]string, members)
	for i, p := range ports {
		hosts[i] = fmt.Sprintf("127.0.0.1:%d", p)
	}

	// The gates: round k's calls wait until gate k is released.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	gates, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer gates.Close(context.Background())
	for k := 1; k <= kills; k++ {
		if _, err := gates.Exec(ctx, "SELECT pg_advisory_lock($1, $2)", gateClass, k); err != nil {
			t.Fatal(err)
		}
	}
	progress, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer progress.Close(context.Background())
	if _, err := progress.Exec(ctx, "LISTEN "+progressChannel); err != nil {
		t.Fatal(err)
	}
	release := func(k int) {
		t.Helper()
		var ok bool
		if err := gates.QueryRow(ctx, "SELECT pg_advisory_unlock($1, $2)", gateClass, k).Scan(&ok); err != nil || !ok {
			t.Fatalf("release gate %d: %v %v", k, ok, err)
		}
	}

	// The first members start at once; a killed member's replacement
	// has joined before the next gate opens.
	children := make([]*tooltest.Child, members)
	start := func(i int) {
		children[i] = tooltest.StartChild(t, "^TestClusterMemberChild$",
			childEnv+"="+strconv.Itoa(ports[i]), childHostsEnv+"="+strings.Join(hosts, ","),
			childSchemaEnv+"="+schema, childSideEnv+"="+string(side),
			childRoundsEnv+"="+strconv.Itoa(rounds), childGatesEnv+"="+strconv.Itoa(kills),
			"POLYWEAVE_TEST_POSTGRES="+dsn, "GORACE=exitcode=0 log_path="+raceLog)
	}
	ready := func(i int) {
		t.Helper()
		if mark := children[i].Mark(t); !strings.HasPrefix(mark, "ready ") {
			t.Fatalf("member %d: mark %q", i, mark)
		}
	}
	for i := range members {
		start(i)
	}
	for i := range members {
		ready(i)
	}

	// The client runs in a child process too: the pinned protoactor's
	// own data races (its block list, written by the provider while a
	// member connects) are told from this module's there.
	client := tooltest.StartChild(t, "^TestClusterKillClientChild$",
		childKillClientEnv+"="+strconv.Itoa(sessions), childHostsEnv+"="+strings.Join(hosts, ","),
		childSchemaEnv+"="+schema, "POLYWEAVE_TEST_POSTGRES="+dsn, "GORACE=exitcode=0 log_path="+raceLog)
	if mark := client.Mark(t); mark != "ready" {
		t.Fatalf("client: mark %q", mark)
	}

	for k := 1; k <= kills; k++ {
		release(k)
		// The kill lands at a random point of the sessions' work: once a
		// random number of calls (up to half a round's) have done theirs
		// since the last kill; the others are on their way between two
		// gates. Every round after this one still has all its calls to
		// make, so the count is always reached.
		for range rand.IntN(sessions/2 + 1) {
			if _, err := progress.WaitForNotification(ctx); err != nil {
				t.Fatalf("waiting for the calls' progress before kill %d: %v", k, err)
			}
		}
		victim := rand.IntN(members)
		children[victim].Kill(t)
		start(victim)
		ready(victim)
	}
	// Every session's outcome, as the client marks it.
	activations := 0
	for range sessions {
		m := client.Mark(t)
		if strings.HasPrefix(m, "error ") {
			t.Fatalf("session %s", strings.TrimPrefix(m, "error "))
		}
		f := strings.SplitN(m, " ", 4)
		epoch, err := strconv.Atoi(f[min(2, len(f)-1)])
		if len(f) != 4 || f[0] != "ran" || err != nil {
			t.Fatalf("client: mark %q", m)
		}
		if f[3] != "All done." {
			t.Errorf("session %s answered %q", f[1], f[3])
		}
		activations += epoch
	}
	client.Wait(t)
	for _, c := range children {
		c.Stop(t)
	}

	checkRaceReports(t, filepath.Dir(raceLog))

	// No call ran twice; every call whose result is stored as a success
	// ran exactly once.
	ran := side.runs(t)
	for line, n := range ran {
		if n != 1 {
			t.Errorf("%s ran %d times", line, n)
		}
	}
	store := openStore(t, schema)
	succeeded, interrupted := 0, 0
	for i := range sessions {
		id := fmt.Sprintf("s%02d", i)
		st, ok, err := tools.ReadSession(ctx, store, id)
		if err != nil || !ok {
			t.Fatalf("read session %s: %v %v", id, ok, err)
		}
		for _, raw := range st.GetMessages() {
			var msg struct {
				Role       string `json:"role"`
				ToolCallID string `json:"tool_call_id"`
				Content    string `json:"content"`
			}
			if err := json.Unmarshal(raw, &msg); err != nil {
				t.Fatal(err)
			}
			if msg.Role != "tool" {
				continue
			}
			line := id + " " + msg.ToolCallID
			switch {
			case strings.Contains(msg.Content, `"appended"`):
				succeeded++
				if ran[line] != 1 {
					t.Errorf("%s succeeded but ran %d times", line, ran[line])
				}
			case strings.Contains(msg.Content, string(tools.FailureInterrupted)):
				interrupted++
			default:
				t.Errorf("%s: result %s", line, msg.Content)
			}
		}
	}
	t.Logf("%d sessions, %d kills: %d activations in all (%d after a kill or a move), %d calls succeeded, %d interrupted, %d lines appended",
		sessions, kills, activations, activations-sessions, succeeded, interrupted, len(ran))
	if succeeded+interrupted != sessions*rounds {
		t.Errorf("%d results stored, want %d", succeeded+interrupted, sessions*rounds)
	}
	// Each kill took at least one session's member away.
	if activations-sessions < kills || interrupted == 0 {
		t.Errorf("%d activations after the first and %d interrupted calls for %d kills: the kills did not hit the sessions", activations-sessions, interrupted, kills)
	}
}

// checkRaceReports reads the race detector's reports the members wrote in
// dir (when the test binary was built with -race) and fails t for each
// one where either racing access is in this module's code, or passes
// through one of the functions through (this module's, as the race
// detector names them: "github.com/…/cluster.(*Member).Members()"),
// which must not read the pinned protoactor's state unguarded. The
// others are races of the pinned protoactor cluster among its own
// goroutines (its gossip actor reads the member list and block list that
// its provider's goroutine replaces, unlocked): they are logged, not
// fixed here.
func checkRaceReports(t *testing.T, dir string, through ...string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "race.*"))
	if err != nil {
		t.Fatal(err)
	}
	theirs, where := 0, map[string]bool{}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, report := range strings.Split(string(b), "==================") {
			if !strings.Contains(report, "WARNING: DATA RACE") {
				continue
			}
			ours, tops := raceTops(report, through)
			if len(ours) > 0 {
				t.Errorf("a member hit a data race in this module's code (%s):\n%s", strings.Join(ours, ", "), report)
				continue
			}
			theirs++
			where[strings.Join(tops, " / ")] = true
		}
	}
	if theirs > 0 {
		t.Logf("%d data race reports of the pinned protoactor cluster in the members (both accesses in its code): %s",
			theirs, strings.Join(slices.Sorted(maps.Keys(where)), "; "))
	}
}

// raceTops returns the functions at the top of a report's access stacks
// (all), and this module's among them (ours); an access whose stack
// passes through one of the functions through is this module's too,
// named by that function.
func raceTops(report string, through []string) (ours, all []string) {
	lines := strings.Split(report, "\n")
	for i, l := range lines {
		l = strings.TrimSpace(l)
		if !strings.HasSuffix(l, ":") || !strings.Contains(l, " at 0x") || i+1 >= len(lines) {
			continue // not the head of an access stack
		}
		top := strings.TrimSpace(lines[i+1])
		all = append(all, top)
		if strings.HasPrefix(top, "github.com/polyweave/polyweave-go/") {
			ours = append(ours, top)
			continue
		}
		for _, frame := range lines[i+1:] {
			frame = strings.TrimSpace(frame)
			if frame == "" {
				break // the end of the stack
			}
			if slices.Contains(through, frame) {
				ours = append(ours, frame)
				break
			}
		}
	}
	return ours, all
}
