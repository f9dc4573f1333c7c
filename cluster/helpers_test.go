package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	mathrand "math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pacluster "github.com/asynkron/protoactor-go/cluster"
	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/cluster"
	"github.com/polyweave/polyweave-go/durability/pgstore"
	"github.com/polyweave/polyweave-go/durability/pgstore/pgtest"
	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/tools/tooltest"
)

// dsn connects to the throwaway PostgreSQL server TestMain starts (child
// processes get it through pgtest.EnvDSN and start none).
var dsn string

func TestMain(m *testing.M) {
	// Every member of the kill test holds up to one connection per
	// session waiting at a gate, besides its store's.
	srv, err := pgtest.Start(&pgtest.Options{Settings: map[string]string{"max_connections": "500"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dsn = srv.DSN
	code := m.Run()
	if err := sharedEtcd.stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if err := srv.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

var schemas atomic.Int64

// freshSchema names a schema no other test uses.
func freshSchema() string { return fmt.Sprintf("c%d_%d", os.Getpid(), schemas.Add(1)) }

func openStore(t testing.TB, schema string) *pgstore.Store {
	t.Helper()
	return openStoreAt(t, dsn, schema)
}

// openStoreAt opens a store on schema of the server at dsn, closed at t's
// cleanup.
func openStoreAt(t testing.TB, dsn, schema string) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), dsn, &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatalf("pgstore.Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// dsnNamed returns dsn with the connections' application_name set to
// name: a test that breaks connections finds its own in pg_stat_activity
// by it, and leaves those of the tests that run beside it alone.
func dsnNamed(name string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		q := u.Query()
		q.Set("application_name", name)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " application_name=" + name // keyword/value form
}

// freePorts returns n distinct free loopback ports.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports, err := freeLoopbackPorts(n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

// stablePorts returns n distinct free loopback ports for a test that
// binds one, closes it and binds it again later (a process restarted at
// the same port): ports below the kernel's range of ephemeral ports,
// which it never hands out to a socket bound to port 0, as the tests
// beside this one bind theirs (and as freePorts finds its ports), so no
// other test takes one meanwhile. Where the range cannot be read, they
// are freePorts'.
func stablePorts(t testing.TB, n int) []int {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	var low int
	if err == nil {
		_, err = fmt.Sscan(string(b), &low)
	}
	const lowest = 10000
	if err != nil || low <= lowest+n {
		return freePorts(t, n)
	}
	var out []int
	for tries := 0; len(out) < n; tries++ {
		if tries == 1000 {
			t.Fatalf("no %d free loopback ports from %d to %d", n, lowest, low-1)
		}
		port := lowest + mathrand.IntN(low-lowest)
		if slices.Contains(out, port) {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		out = append(out, port)
	}
	return out
}

// freeLoopbackPorts returns n distinct free loopback ports.
func freeLoopbackPorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// firstRequest is the first request of every test session.
func firstRequest(id string) []*messages.Frame {
	return []*messages.Frame{messages.RawParam("", models.ParamMessages,
		json.RawMessage(fmt.Sprintf(`[{"role":"user","content":"append the lines of %s"}]`, id)))}
}

// sideFile records the side effects of the append tool: one line per run
// of a call, "<session> <tool call id>".
type sideFile string

// hooks run in the append tool's handler, before and after the append.
type hooks struct {
	before, after func(ctx context.Context, call string)
}

func (f sideFile) appendTool(session string, h hooks) *tools.Tool {
	return tools.MustNew(tools.Definition{Name: "append", Timeout: tools.NoTimeout,
		Schema: json.RawMessage(`{"type":"object","properties":{"line":{"type":"string"}},"required":["line"]}`),
		Handler: func(ctx context.Context, args json.RawMessage) (any, error) {
			info, _ := tools.CallFrom(ctx)
			if h.before != nil {
				h.before(ctx, info.ToolCallID)
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			fh, err := os.OpenFile(string(f), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return nil, err
			}
			defer fh.Close()
			// One write of one short line: O_APPEND keeps lines whole
			// across processes.
			if _, err := fh.WriteString(session + " " + info.ToolCallID + "\n"); err != nil {
				return nil, err
			}
			if h.after != nil {
				h.after(ctx, info.ToolCallID)
			}
			return map[string]string{"appended": info.ToolCallID}, nil
		}})
}

// runs returns how many times each "<session> <call>" ran.
func (f sideFile) runs(t testing.TB) map[string]int {
	t.Helper()
	b, err := os.ReadFile(string(f))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	out := map[string]int{}
	for line := range strings.Lines(string(b)) {
		out[strings.TrimSpace(line)]++
	}
	return out
}

func newSideFile(t testing.TB) sideFile { return sideFile(filepath.Join(t.TempDir(), "side.txt")) }

// script is a conversation of rounds tool rounds, one append call each
// (ids c1, c2, …), then the answer "All done.".
func script(rounds int) scripted.Script {
	s := scripted.Script{Select: scripted.ByConversation}
	for i := 1; i <= rounds; i++ {
		s.Turns = append(s.Turns, scripted.Turn{Text: fmt.Sprintf("Round %d.", i),
			ToolCalls: []scripted.ToolCall{{ID: fmt.Sprintf("c%d", i), Name: "append", Arguments: fmt.Sprintf(`{"line":"%d"}`, i)}}})
	}
	s.Turns = append(s.Turns, scripted.Turn{Text: "All done."})
	return s
}

// sessionFunc builds test sessions: a scripted model and the append tool.
func sessionFunc(t testing.TB, rounds int, side sideFile, hook func(session string) hooks) func(id string) (actors.Spec, *tools.LoopOptions, error) {
	model, err := scripted.New(script(rounds), nil)
	if err != nil {
		t.Fatal(err)
	}
	return func(id string) (actors.Spec, *tools.LoopOptions, error) {
		var h hooks
		if hook != nil {
			h = hook(id)
		}
		return model.Spec("model"), &tools.LoopOptions{
			RouterOptions: tools.RouterOptions{Name: "session", Tools: []*tools.Tool{side.appendTool(id, h)}},
			MaxIterations: rounds + 1,
		}, nil
	}
}

// leakCheck fails t at cleanup when goroutines started during the test
// are still running. Two kinds of goroutines of the pinned protoactor end
// by themselves, later:
//   - the log throttles of the gossiper and of its actor start a timer
//     goroutine at their first throttled record (a gossip request to a
//     member that has left), which ends 60 s later; nothing stops it
//     earlier, so these are ignored;
//   - every cluster request that logs a failed attempt (a member was
//     killed) starts a throttle timer goroutine of its own, which ends
//     2 s later (the period is fixed in protoactor, whatever the Config
//     says): the check waits for those, up to about 4 s, rather than
//     ignoring them, so one that never ends would still fail the test.
func leakCheck(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		if err := findLeaks(before); err != nil {
			t.Error(err)
		}
	})
}

// parallelLeakCheck marks t as a test to run in parallel with the other
// parallel tests of the package, and checks for leaked goroutines as
// leakCheck does, for the group of parallel tests that run at once: a
// goroutine started by one of them is only known to be a leak once none
// of them runs. The goroutines present when the first of the group
// starts are ignored, and the check runs at the cleanup of the last one
// to end; it fails that test. The group's tests run their members in
// child processes (each of which checks its own goroutines) and host at
// most one cluster member in this process: a member that starts sets
// gRPC's global logger, racing with the gRPC goroutines of another.
func parallelLeakCheck(t *testing.T) {
	t.Parallel()
	parallelGroup.mu.Lock()
	defer parallelGroup.mu.Unlock()
	if parallelGroup.running == 0 {
		parallelGroup.before = goleak.IgnoreCurrent()
	}
	parallelGroup.running++
	t.Cleanup(func() {
		parallelGroup.mu.Lock()
		defer parallelGroup.mu.Unlock()
		if parallelGroup.running--; parallelGroup.running > 0 {
			return
		}
		// The shared etcd's log reader lives as long as the package's
		// tests.
		if err := findLeaks(parallelGroup.before, goleak.IgnoreAnyFunction("github.com/polyweave/polyweave-go/cluster_test.(*etcdServer).readLog")); err != nil {
			t.Errorf("the parallel tests that ended with this one left goroutines behind: %v", err)
		}
	})
}

// parallelGroup is the state of parallelLeakCheck.
var parallelGroup struct {
	mu      sync.Mutex
	running int           // parallel tests running
	before  goleak.Option // the goroutines when the first of them started
}

// findLeaks waits (see leakcheck.Find) for the goroutines that the
// pinned protoactor ends by itself (see leakCheck) and returns goleak's
// report of those still running that before does not ignore, nil when
// none is.
func findLeaks(before goleak.Option, more ...goleak.Option) error {
	return leakcheck.Find(append([]goleak.Option{before,
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/cluster.(*Gossiper).StartGossiping.NewThrottle.func3.1"),
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/cluster.NewGossipActor.NewThrottleWithLogger.func2.1")},
		more...)...)
}

// childMain is the body of a test that makes this binary a child process
// of another test: it does nothing unless env is set, runs run with its
// value, and exits before the testing package looks for data races — the
// parent reads the race detector's reports (see raceReports) and tells
// the pinned protoactor's own races from this module's.
func childMain(t *testing.T, env string, run func(*testing.T, string) error) {
	value := os.Getenv(env)
	if value == "" {
		return
	}
	if err := run(t, value); err != nil {
		t.Fatal(err)
	}
	os.Exit(0)
}

// startLoneMember starts a one-member cluster (the automanaged provider
// of loneProvider) with opts, whose Provider it sets, and closes it at
// t's cleanup, before leakCheck's check.
func startLoneMember(t *testing.T, opts *cluster.Options) *cluster.Member {
	t.Helper()
	opts.Provider = loneProvider(t)
	return startMember(t, opts)
}

// healthListener returns a listener on a free port of loopback for a
// member's health checks (cluster.HealthListener), and its port: bound
// now, so that no other test takes the port before the member serves it.
// It is closed at t's cleanup (again, if the member closed it).
func healthListener(t testing.TB) (net.Listener, int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, l.Addr().(*net.TCPAddr).Port
}

// loneProvider is the automanaged provider of a one-member cluster: the
// member answers health checks on a listener of healthListener, and
// polls only itself.
func loneProvider(t testing.TB) pacluster.ClusterProvider {
	t.Helper()
	p, _ := loneProviderAt(t)
	return p
}

// loneProviderAt is loneProvider, and the host:port of the member's
// health checks: a member in a child process tells its parent, which
// tells the processes that poll it. The child binds the port itself (on
// port 0), so no other process can take it before the member serves it,
// as one could take a port the parent found free and passed on.
func loneProviderAt(t testing.TB) (pacluster.ClusterProvider, string) {
	t.Helper()
	l, _ := healthListener(t)
	return cluster.Automanaged(0, []string{l.Addr().String()}, 100*time.Millisecond, cluster.HealthListener(l)), l.Addr().String()
}

// startMember starts a member (or a client) with opts and closes it at
// t's cleanup, before leakCheck's check.
func startMember(t *testing.T, opts *cluster.Options) *cluster.Member {
	t.Helper()
	m, err := cluster.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	closeAtCleanup(t, m)
	return m
}

// closeAtCleanup closes m at t's cleanup, and fails t if that fails.
func closeAtCleanup(t *testing.T, m *cluster.Member) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
}

// incarnation is the outcome of one incarnation (cluster.RunIncarnation).
type incarnation struct {
	state, text string
	epoch       uint64
}

// stalledIncarnation starts the first incarnation of session id (two
// rounds of append calls, recorded in side) on store, in a runtime of its
// own, and returns once it is inside its first call, c1, which waits for
// release (called at t's cleanup at the latest). fn is the session
// function for every incarnation (later ones do not wait); first
// delivers the first incarnation's outcome.
func stalledIncarnation(ctx context.Context, t *testing.T, store *pgstore.Store, side sideFile, id string) (fn cluster.SessionFunc, release func(), first <-chan incarnation) {
	t.Helper()
	var incarnations atomic.Int32
	started, held := make(chan struct{}), make(chan struct{})
	fn = sessionFunc(t, 2, side, func(string) hooks {
		n := incarnations.Add(1)
		return hooks{before: func(_ context.Context, call string) {
			if n == 1 && call == "c1" {
				close(started)
				<-held
			}
		}}
	})
	rt := newRuntime(t)
	release = sync.OnceFunc(func() { close(held) })
	t.Cleanup(release) // before rt closes, which waits for the call
	out := make(chan incarnation, 1)
	go func() {
		s, x, e := cluster.RunIncarnation(ctx, rt, store, fn, id, firstRequest(id)...)
		out <- incarnation{s, x, e}
	}()
	select {
	case <-started:
	case o := <-out:
		t.Fatalf("the first incarnation ended before its call ran: %+v", o)
	}
	return fn, release, out
}

// readyMark reads child's next mark, "ready ADDRESS HEALTH" (the
// member's address, and the host:port of its health checks), and returns
// both; it fails t on another mark. who names the child in the failure.
func readyMark(t *testing.T, child *tooltest.Child, who string) (address, health string) {
	t.Helper()
	m := child.Mark(t)
	f := strings.Fields(m)
	if len(f) != 3 || f[0] != "ready" {
		t.Fatalf("%s: mark %q, want \"ready ADDRESS HEALTH\"", who, m)
	}
	return f[1], f[2]
}
