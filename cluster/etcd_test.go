package cluster_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pacluster "github.com/asynkron/protoactor-go/cluster"
	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/cluster"
	"github.com/polyweave/polyweave-go/internal/syncbuf"
	"github.com/polyweave/polyweave-go/tools/tooltest"
)

// The etcd test's members run in child processes (TestClusterEtcdChild),
// configured through these variables besides the kill test's schema and
// side file.
const (
	childEtcdEnv       = "POLYWEAVE_CLUSTER_ETCD"        // the etcd client endpoint
	childEtcdPrefixEnv = "POLYWEAVE_CLUSTER_ETCD_PREFIX" // the key prefix of the test's members
	childEtcdPollEnv   = "POLYWEAVE_CLUSTER_ETCD_POLL"   // set: the topology marks come from polling Member.Members
	childEtcdHoldEnv   = "POLYWEAVE_CLUSTER_ETCD_HOLD"   // set: the member waits between its read of the members and its watch
)

// etcdServer is a throwaway single-node etcd (Debian's etcd-server,
// through scripts/etcd.sh) on loopback ports, shared by the package's
// tests (see startEtcd).
type etcdServer struct {
	once     sync.Once
	endpoint string // host:port of its client URL
	err      error  // why it did not start
	cmd      *exec.Cmd
	dir      string
	drained  chan struct{} // closed when its stderr has ended
	prefixes atomic.Int64
}

// sharedEtcd is the etcd of the package's tests; TestMain stops it.
var sharedEtcd etcdServer

// startEtcd returns the client endpoint of the package's etcd, which it
// starts on the first call, and a key prefix that no other test uses:
// each test's members register under a prefix of their own, so the tests
// that use etcd can run at once.
func startEtcd(t *testing.T) (endpoint, prefix string) {
	t.Helper()
	e := &sharedEtcd
	e.once.Do(e.start)
	if e.err != nil {
		t.Fatal(e.err)
	}
	return e.endpoint, fmt.Sprintf("/polyweave-test-%d", e.prefixes.Add(1))
}

func (e *etcdServer) start() {
	out, err := exec.Command("bash", filepath.Join("..", "scripts", "etcd.sh")).Output()
	if err != nil {
		e.err = fmt.Errorf("scripts/etcd.sh: %v (it installs Debian's etcd-server)", err)
		return
	}
	bin := strings.TrimSpace(string(out))
	if e.dir, err = os.MkdirTemp("", "polyweave-etcd-"); err != nil {
		e.err = err
		return
	}
	// etcd binds its ports itself, from the addresses it is given: ports
	// found free, which another process may take before etcd binds them.
	// A start that fails for a port in use is tried again, with others.
	for attempt := 1; ; attempt++ {
		if inUse := e.run(bin, filepath.Join(e.dir, fmt.Sprintf("etcd-%d", attempt))); !inUse || attempt == 5 {
			return
		}
	}
}

// run starts etcd with its data in dir, on free ports, and waits until
// it is ready. It reports whether it failed because a port was in use
// (etcd has exited then, and been waited for).
func (e *etcdServer) run(bin, dir string) (inUse bool) {
	e.err, e.cmd = nil, nil
	ports, err := freeLoopbackPorts(2)
	if err != nil {
		e.err = err
		return false
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	e.cmd = exec.Command(bin, "--data-dir", dir,
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "default="+peer)
	e.cmd.SysProcAttr = dieWithParent()
	stderr, err := e.cmd.StderrPipe()
	if err != nil {
		e.err = err
		return false
	}
	if err := e.cmd.Start(); err != nil {
		e.err = err
		e.cmd = nil
		return false
	}
	ready := make(chan struct{})
	var log strings.Builder // until ready; read after ready or exit
	e.drained = make(chan struct{})
	go e.readLog(stderr, ready, &log)
	select {
	case <-ready:
		e.endpoint = fmt.Sprintf("127.0.0.1:%d", ports[0])
	case <-e.drained:
		e.err = fmt.Errorf("etcd exited before it was ready:\n%s", log.String())
		if strings.Contains(log.String(), "address already in use") {
			e.cmd.Wait()
			e.cmd = nil
			return true
		}
	case <-time.After(60 * time.Second):
		e.err = errors.New("etcd not ready after a minute")
	}
	return false
}

// readLog reads etcd's stderr to its end, keeping it in log until etcd
// says it is ready (it closes ready then).
func (e *etcdServer) readLog(stderr io.Reader, ready chan struct{}, log *strings.Builder) {
	defer close(e.drained)
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		select {
		case <-ready:
			continue
		default:
		}
		log.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "ready to serve client requests") {
			close(ready)
		}
	}
}

// stop stops etcd, if it started, and removes its data.
func (e *etcdServer) stop() error {
	if e.cmd != nil {
		e.cmd.Process.Kill()
		<-e.drained
		e.cmd.Wait()
	}
	if e.dir != "" {
		return os.RemoveAll(e.dir)
	}
	return nil
}

// TestClusterEtcdChild is an etcd-provided member's body; it does nothing
// unless started by TestEtcd_MembersJoinAndLeave. It marks "ready
// ADDRESS", then "topology A,B,…" (sorted member addresses) whenever the
// members change, runs the sessions named by "run ID" lines on its stdin
// (marking "ran ID MEMBER EPOCH"), and leaves the cluster when its stdin
// closes; it fails when goroutines it started are still running once
// the member has closed.
func TestClusterEtcdChild(t *testing.T) {
	childMain(t, childEtcdEnv, runEtcdChild)
}

func runEtcdChild(t *testing.T, endpoint string) error {
	store := openStore(t, os.Getenv(childSchemaEnv))
	// Everything the member starts from here on, the etcd client's
	// goroutines included, ends when it closes.
	before := goleak.IgnoreCurrent()
	provider, err := cluster.Etcd([]string{endpoint}, os.Getenv(childEtcdPrefixEnv))
	if err != nil {
		return err
	}
	mark := tooltest.Marker()
	var released chan struct{} // closed once the held member has read its line
	if os.Getenv(childEtcdHoldEnv) != "" {
		released = make(chan struct{})
		cluster.SetFirstWatchHook(func() {
			mark("read the members")
			readLine(os.Stdin)
			close(released)
		})
	}
	m, err := cluster.Start(&cluster.Options{
		Provider: provider,
		Store:    store,
		Session:  sessionFunc(t, 2, sideFile(os.Getenv(childSideEnv)), nil),
		Hold:     killHold, RequestTimeout: killTimeout,
	})
	if err != nil {
		return err
	}
	if released != nil {
		// Start returns while the first watch is held: stdin is the
		// hook's until then.
		<-released
	}
	mark("ready %s %d", m.Address(), os.Getpid())
	topology := func(members []string) {
		slices.Sort(members)
		mark("topology %s", strings.Join(members, ","))
	}
	var stopWatching func()
	if os.Getenv(childEtcdPollEnv) != "" {
		stopWatching = pollMembers(m, topology)
	} else {
		sub := m.System().EventStream.Subscribe(func(ev any) {
			if tp, ok := ev.(*pacluster.ClusterTopology); ok {
				var addrs []string
				for _, mem := range tp.Members {
					addrs = append(addrs, mem.Address())
				}
				topology(addrs)
			}
		})
		stopWatching = func() { m.System().EventStream.Unsubscribe(sub) }
		topology(m.Members()) // the topology before the subscription
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if sc.Text() == "excluded?" {
			select {
			case <-m.Excluded():
				mark("excluded yes")
			case <-time.After(20 * time.Second):
				mark("excluded no")
			}
			continue
		}
		id, ok := strings.CutPrefix(sc.Text(), "run ")
		if !ok {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		res, err := m.Run(ctx, id, firstRequest(id)...)
		cancel()
		if err != nil {
			mark("error %s excluded=%t %v", id, errors.Is(err, cluster.ErrExcluded), err)
			continue
		}
		mark("ran %s %s %d", id, res.Member, res.Epoch)
	}
	stopWatching()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Close(ctx); err != nil {
		return err
	}
	// The store is closed first: a pooled connection whose write was
	// slow (a loaded machine) keeps a reader goroutine until its next
	// use or its close.
	store.Close()
	if err := findLeaks(before); err != nil {
		return fmt.Errorf("the member left goroutines behind: %w", err)
	}
	return nil
}

// readLine reads r up to its next line end, one byte at a time: it reads
// nothing beyond it.
func readLine(r io.Reader) {
	b := make([]byte, 1)
	for {
		if n, err := r.Read(b); err != nil || (n == 1 && b[0] == '\n') {
			return
		}
	}
}

// pollMembers calls m.Members every millisecond, in a goroutine of its
// own, and passes it to topology whenever it changes, until the function
// it returns is called (which waits for the goroutine to end).
func pollMembers(m *cluster.Member, topology func([]string)) (stop func()) {
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		var last []string
		for {
			members := m.Members()
			slices.Sort(members)
			if last == nil || !slices.Equal(members, last) {
				last = append([]string{}, members...)
				topology(members)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() {
		close(done)
		<-ended
	}
}

// etcdMembers starts the members (TestClusterEtcdChild) of one test on
// the package's etcd, under a key prefix of the test's own, with the
// store's schema, the side file and the race log.
type etcdMembers struct {
	endpoint, prefix, schema string
	side                     sideFile
	raceLog                  string
}

func newEtcdMembers(t *testing.T) *etcdMembers {
	t.Helper()
	endpoint, prefix := startEtcd(t)
	return &etcdMembers{endpoint: endpoint, prefix: prefix, schema: freshSchema(), side: newSideFile(t),
		raceLog: filepath.Join(t.TempDir(), "race")}
}

// start starts a member and returns it with its address and process id
// once it is ready.
func (e *etcdMembers) start(t *testing.T) (*tooltest.Child, string, int) {
	t.Helper()
	c := e.spawn(t)
	addr, pid := etcdReady(t, c)
	return c, addr, pid
}

// spawn starts a member, with env added to its environment, and returns
// at once (see etcdReady).
func (e *etcdMembers) spawn(t *testing.T, env ...string) *tooltest.Child {
	t.Helper()
	return tooltest.StartChild(t, "^TestClusterEtcdChild$", append([]string{childEtcdEnv + "=" + e.endpoint,
		childEtcdPrefixEnv + "=" + e.prefix, childSchemaEnv + "=" + e.schema, childSideEnv + "=" + string(e.side),
		"POLYWEAVE_TEST_POSTGRES=" + dsn, "GORACE=exitcode=0 log_path=" + e.raceLog}, env...)...)
}

// etcdReady returns the address and process id of member c once it is
// ready.
func etcdReady(t *testing.T, c *tooltest.Child) (string, int) {
	t.Helper()
	var addr string
	var pid int
	if _, err := fmt.Sscanf(c.Mark(t), "ready %s %d", &addr, &pid); err != nil {
		t.Fatalf("member did not say it was ready: %v", err)
	}
	return addr, pid
}

// TestEtcd_MembersJoinAndLeave runs members in child processes with the
// etcd provider against a real etcd server: three members join and each
// sees the three; sessions run from one member are placed on several, and
// reached from another member; a member killed with SIGKILL leaves (its
// lease expires) and its sessions are activated again on the others; a
// member that closes leaves at once; a new member joins and runs sessions.
func TestEtcd_MembersJoinAndLeave(t *testing.T) {
	parallelLeakCheck(t)
	members := newEtcdMembers(t)
	side, raceLog := members.side, members.raceLog
	start := func() (*tooltest.Child, string) {
		c, addr, _ := members.start(t)
		return c, addr
	}
	// run runs session id from member c and returns where it ran and its
	// epoch.
	run := func(c *tooltest.Child, id string) (string, int) {
		t.Helper()
		c.Send(t, "run "+id)
		for {
			m := c.Mark(t)
			if strings.HasPrefix(m, "error "+id+" ") {
				t.Fatalf("session %s: %s", id, m)
			}
			if rest, ok := strings.CutPrefix(m, "ran "+id+" "); ok {
				member, epoch, _ := strings.Cut(rest, " ")
				n, err := strconv.Atoi(epoch)
				if err != nil {
					t.Fatal(m)
				}
				return member, n
			}
		}
	}

	a, addrA := start()
	b, addrB := start()
	c, addrC := start()
	for _, m := range []*tooltest.Child{a, b, c} {
		waitTopology(t, m, addrA, addrB, addrC)
	}

	// Sessions run from A are placed over the members, and reached from B.
	const n = 12
	placed := map[string]string{}
	for i := range n {
		id := fmt.Sprintf("s%02d", i)
		member, epoch := run(a, id)
		if epoch != 1 || !slices.Contains([]string{addrA, addrB, addrC}, member) {
			t.Fatalf("session %s ran on %s at epoch %d", id, member, epoch)
		}
		placed[id] = member
	}
	on := map[string]int{}
	for _, m := range placed {
		on[m]++
	}
	if len(on) < 2 {
		t.Errorf("12 sessions all placed on one member: %v", on)
	}
	if member, epoch := run(b, "s00"); member != placed["s00"] || epoch != 1 {
		t.Errorf("s00 reached from B: on %s at epoch %d, want its activation on %s", member, epoch, placed["s00"])
	}

	// C dies: it leaves once its lease expires, and its sessions are
	// activated again on A or B (answering from the store).
	c.Kill(t)
	waitTopology(t, a, addrA, addrB)
	waitTopology(t, b, addrA, addrB)
	moved := 0
	for id, was := range placed {
		if was != addrC {
			continue
		}
		moved++
		if member, epoch := run(b, id); member == addrC || epoch != 2 {
			t.Errorf("session %s of the dead member: on %s at epoch %d, want on A or B at epoch 2", id, member, epoch)
		}
	}

	// B leaves gracefully: at once, without a lease to expire.
	b.Stop(t)
	waitTopology(t, a, addrA)

	// D joins; new sessions run from it.
	d, addrD := start()
	waitTopology(t, a, addrA, addrD)
	waitTopology(t, d, addrA, addrD)
	for i := range 4 {
		id := fmt.Sprintf("t%d", i)
		if member, epoch := run(d, id); epoch != 1 || (member != addrA && member != addrD) {
			t.Errorf("session %s ran on %s at epoch %d", id, member, epoch)
		}
	}
	a.Stop(t)
	d.Stop(t)
	checkRaceReports(t, filepath.Dir(raceLog))

	// Every call ran exactly once: the sessions ended before any member
	// left, so a new activation only answered from the store.
	for line, k := range side.runs(t) {
		if k != 1 {
			t.Errorf("%s ran %d times", line, k)
		}
	}
	if got, want := len(side.runs(t)), (n+4)*2; got != want {
		t.Errorf("%d calls ran, want %d", got, want)
	}
	t.Logf("12 sessions on %d members (%d on the killed one)", len(on), moved)
}

// TestEtcd_NothingBeforeStart: the etcd provider connects when its member
// starts, not before: a provider whose Start fails (before it starts the
// provider) leaves nothing running.
func TestEtcd_NothingBeforeStart(t *testing.T) {
	leakCheck(t)
	provider, err := cluster.Etcd([]string{"127.0.0.1:1"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Start(&cluster.Options{Provider: provider}); err == nil || !strings.Contains(err.Error(), "no store") {
		t.Fatalf("Start without a store: %v, want the error that it has none", err)
	}
}

// childEtcdStartEnv makes this test binary a member (or a client) with
// the etcd provider whose etcd does not answer (TestClusterEtcdStartChild):
// "member ENDPOINT" or "client ENDPOINT", where ENDPOINT is an etcd
// client endpoint, or "fake:KIND" for a fakeEtcd that the child serves,
// silent on KIND; a third field, when there is one, is the provider's
// timeout (time.ParseDuration), 300 ms otherwise.
const childEtcdStartEnv = "POLYWEAVE_CLUSTER_ETCD_START"

// TestClusterEtcdStartChild is the body of the members of
// TestEtcd_UnreachableStartFails and TestEtcd_SilentOnRegisterOrDeregister;
// it does nothing unless started by them. The child starts, and marks "start ERROR" when Start fails,
// or, once it has started and closed, "close ERROR" (the error of Close,
// "<nil>" for none); then "took D" (how long the failed call took),
// "etcdlogs N" (the etcd client's records in the member's logs) and
// "stderr N" (the lines written to stderr meanwhile). It fails when
// goroutines it started are still running.
func TestClusterEtcdStartChild(t *testing.T) {
	childMain(t, childEtcdStartEnv, func(t *testing.T, value string) error {
		fields := strings.Fields(value)
		mode, endpoint, timeout := fields[0], fields[1], 300*time.Millisecond
		if len(fields) > 2 {
			d, err := time.ParseDuration(fields[2])
			if err != nil {
				return err
			}
			timeout = d
		}
		store := openStore(t, os.Getenv(childSchemaEnv))
		before := goleak.IgnoreCurrent()
		stopFake := func() {}
		if kind, ok := strings.CutPrefix(endpoint, "fake:"); ok {
			endpoint, stopFake = startFakeEtcd(t, kind)
		}
		mark := tooltest.Marker()
		var logs syncbuf.Buffer
		var took time.Duration
		stderr := captureStderr(t, func() {
			provider, err := cluster.Etcd([]string{endpoint}, "", cluster.EtcdTimeout(timeout))
			if err != nil {
				mark("start %v", err)
				return
			}
			began := time.Now()
			m, err := cluster.Start(&cluster.Options{Provider: provider, Store: store, Client: mode == "client",
				Session: sessionFunc(t, 1, newSideFile(t), nil),
				Logger:  slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			if err != nil {
				took = time.Since(began)
				mark("start %v", err)
				return
			}
			began = time.Now()
			err = m.Close(context.Background())
			took = time.Since(began)
			mark("close %v", err)
		})
		mark("took %v", took.Round(time.Millisecond))
		mark("etcdlogs %d", strings.Count(logs.String(), `"component":"etcd-client"`))
		mark("stderr %d", strings.Count(stderr, "\n"))
		stopFake()
		store.Close() // see runEtcdChild
		if err := findLeaks(before); err != nil {
			return fmt.Errorf("the member left goroutines behind: %w", err)
		}
		return nil
	})
}

// etcdStartChild runs TestClusterEtcdStartChild with value in a child
// process, reads its marks, and checks that it wrote nothing to stderr and
// hit no data race in this module's code. It returns the error its
// Start or Close returned (the mark that starts with want) and how long
// that took, and the number of the etcd client's log records.
func etcdStartChild(t *testing.T, schema, value, want string) (err string, took string, etcdLogs int) {
	t.Helper()
	return spawnEtcdStartChild(t, schema, value)(t, want)
}

// spawnEtcdStartChild starts the child of etcdStartChild and returns the
// function that reads its marks and checks it, as etcdStartChild does:
// several children run side by side.
func spawnEtcdStartChild(t *testing.T, schema, value string) func(t *testing.T, want string) (err string, took string, etcdLogs int) {
	t.Helper()
	raceLog := filepath.Join(t.TempDir(), "race")
	c := tooltest.StartChild(t, "^TestClusterEtcdStartChild$", childEtcdStartEnv+"="+value,
		childSchemaEnv+"="+schema, "POLYWEAVE_TEST_POSTGRES="+dsn, "GORACE=exitcode=0 log_path="+raceLog)
	return func(t *testing.T, want string) (err string, took string, etcdLogs int) {
		t.Helper()
		got := c.Mark(t)
		err, ok := strings.CutPrefix(got, want)
		if !ok {
			t.Fatalf("member: %q, want a mark %q", got, want)
		}
		took = strings.TrimPrefix(c.Mark(t), "took ")
		etcdLogs, _ = strconv.Atoi(strings.TrimPrefix(c.Mark(t), "etcdlogs "))
		if stderr := c.Mark(t); stderr != "stderr 0" {
			t.Errorf("the member wrote to stderr: %s lines", strings.TrimPrefix(stderr, "stderr "))
		}
		c.Wait(t)
		checkRaceReports(t, filepath.Dir(raceLog))
		return err, took, etcdLogs
	}
}

// TestEtcd_UnreachableStartFails: a member whose etcd cannot be reached
// (nothing listens at the endpoint, or a server accepts connections and
// never answers) does not hang in Start: once the provider's timeout has
// passed, Start fails with ErrEtcdUnreachable, naming the endpoint, and
// leaves nothing running. The etcd client logs to the member's logger
// only: nothing is written to stderr. The members run in child processes
// (see TestEtcd_SilentOnRegisterOrDeregister).
func TestEtcd_UnreachableStartFails(t *testing.T) {
	parallelLeakCheck(t)
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		defer close(accepted)
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			accepted <- c // held open, never answered
		}
	}()
	defer func() {
		silent.Close()
		for c := range accepted {
			c.Close()
		}
	}()
	schema := freshSchema()
	openStore(t, schema) // creates it
	// The children start at once (each fails after the timeout, however
	// slow), and are checked one by one.
	type child struct {
		name, endpoint string
		marks          func(*testing.T, string) (string, string, int)
	}
	var children []child
	for name, endpoint := range map[string]string{
		"closed port":     fmt.Sprintf("127.0.0.1:%d", closedPort(t)), // held: nobody else listens on it
		"silent listener": silent.Addr().String(),
	} {
		for _, mode := range []string{"member", "client"} {
			children = append(children, child{name + "/" + mode, endpoint, spawnEtcdStartChild(t, schema, mode+" "+endpoint)})
		}
	}
	for _, c := range children {
		t.Run(c.name, func(t *testing.T) {
			err, took, etcdLogs := c.marks(t, "start ")
			if !strings.Contains(err, cluster.ErrEtcdUnreachable.Error()) || !strings.Contains(err, c.endpoint) {
				t.Fatalf("Start: %s; want an error wrapping %q that names %s", err, cluster.ErrEtcdUnreachable, c.endpoint)
			}
			if etcdLogs == 0 {
				t.Error("no record of the etcd client in the member's logs")
			}
			t.Logf("Start failed after %s (timeout 300ms): %s", took, err)
		})
	}
}

// TestEtcd_SilentOnRegisterOrDeregister: an etcd that answers until the
// member registers its lease, and then falls silent, fails Start with
// ErrEtcdUnreachable (the watch of the members had started: it ends); one
// that falls silent when the member deregisters fails Close with
// ErrEtcdUnreachable. Neither writes to stderr or leaves goroutines
// behind. The members, and their fake etcd, run in child processes:
// protoactor sets gRPC's global logger whenever a member starts, which
// races with the gRPC goroutines of the process that log (the etcd
// client's and server's); data races of the pinned etcd provider (its
// shutdown flag) are told from this module's there too.
func TestEtcd_SilentOnRegisterOrDeregister(t *testing.T) {
	parallelLeakCheck(t)
	schema := freshSchema()
	openStore(t, schema) // creates it
	// The member that must start before etcd falls silent has the time
	// to, however loaded the machine: its timeout, which Close then
	// waits, is longer.
	for _, tc := range []struct{ silentOn, timeout, mark, want string }{
		{"grant", "300ms", "start ", "register with"},
		{"delete", "3s", "close ", "deregister from"},
	} {
		t.Run(tc.silentOn, func(t *testing.T) {
			err, took, _ := etcdStartChild(t, schema, "member fake:"+tc.silentOn+" "+tc.timeout, tc.mark)
			if !strings.Contains(err, cluster.ErrEtcdUnreachable.Error()) || !strings.Contains(err, tc.want) {
				t.Fatalf("member: %s; want an error of %q that wraps %q", err, tc.want, cluster.ErrEtcdUnreachable)
			}
			t.Logf("%s failed after %s (timeout %s): %s", strings.TrimSpace(tc.mark), took, tc.timeout, err)
		})
	}
}

// captureStderr runs fn with os.Stderr sent to a pipe, and returns what
// was written to it.
func captureStderr(t *testing.T, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		r.Close()
		read <- string(b)
	}()
	saved := os.Stderr
	os.Stderr = w
	defer func() {
		os.Stderr = saved
		w.Close()
	}()
	fn()
	os.Stderr = saved
	w.Close()
	return <-read
}
