package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pacluster "github.com/asynkron/protoactor-go/cluster"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/cluster"
	"github.com/polyweave/polyweave-go/durability/pgstore"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// Figure 8, sessions in a cluster: the throughput of sessions run on a
// cluster of two members against the same on a cluster of one. Members
// are processes of this binary (envMember); the first member of each
// cluster drives the sessions (Member.Run, so they are placed over the
// members by id) when this process tells it to on its stdin, and says when
// they are done: this process times the exchange and runs no protoactor
// of its own.

// envMember makes this binary a member of a benchmark cluster; its value
// is the memberSpec as JSON.
const envMember = "POLYWEAVE_BENCH_MEMBER"

// memberSpec is what a benchmark member is told on start. The hosts of
// the cluster it learns on its stdin, once every member has bound its
// health-check listener (see serveMember).
type memberSpec struct {
	DSN    string `json:"dsn"`
	Schema string `json:"schema"`
}

// clusterRounds is how many tool rounds a benchmark session makes before
// its answer; each round's call hashes clusterWork bytes.
const (
	clusterRounds = 3
	clusterWork   = 256 << 10
)

// serveMember runs this process as a benchmark member. It binds its
// health-check listener on a free loopback port and prints "health
// HOST:PORT"; then reads "hosts H1 H2 …" (every member's, its own
// included) on stdin and joins the cluster, serving its health checks on
// that listener (so no other process can take the port in between), and
// prints "ready" once it sees every member. Then, on stdin, "run PREFIX N"
// runs sessions PREFIX-0 … PREFIX-N-1 at once and prints "done" (or
// "error …"); EOF leaves the cluster.
func serveMember(raw string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "bench member:", err)
		os.Exit(1)
	}
	var ms memberSpec
	if err := json.Unmarshal([]byte(raw), &ms); err != nil {
		fail(err)
	}
	ctx := context.Background()
	store, err := pgstore.Open(ctx, ms.DSN, &pgstore.Options{Schema: ms.Schema})
	if err != nil {
		fail(err)
	}
	defer store.Close()
	work := tools.MustNew(tools.Definition{Name: "work", Handler: func(ctx context.Context, args json.RawMessage) (any, error) {
		buf := make([]byte, clusterWork)
		copy(buf, args)
		return fmt.Sprintf("%x", sha256.Sum256(buf)), nil
	}})
	script := scripted.Script{Select: scripted.ByConversation}
	for i := range clusterRounds {
		script.Turns = append(script.Turns, scripted.Turn{Text: "Working.",
			ToolCalls: []scripted.ToolCall{{ID: fmt.Sprint("c", i), Name: "work", Arguments: fmt.Sprintf(`{"round":%d}`, i)}}})
	}
	script.Turns = append(script.Turns, scripted.Turn{Text: "Done."})
	model, err := scripted.New(script, nil)
	if err != nil {
		fail(err)
	}
	health, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(fmt.Errorf("health-check listener: %w", err))
	}
	fmt.Println("health", health.Addr())
	sc := bufio.NewScanner(os.Stdin)
	if !sc.Scan() {
		fail(fmt.Errorf("no hosts on stdin: %v", sc.Err()))
	}
	hosts, ok := strings.CutPrefix(sc.Text(), "hosts ")
	if !ok {
		fail(fmt.Errorf("want hosts on stdin, got %q", sc.Text()))
	}
	members := strings.Fields(hosts)
	m, err := cluster.Start(&cluster.Options{
		Provider: cluster.Automanaged(0, members, 200*time.Millisecond, cluster.HealthListener(health)),
		Store:    store,
		Session: func(string) (actors.Spec, *tools.LoopOptions, error) {
			return model.Spec("model"), &tools.LoopOptions{RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{work}}}, nil
		},
		Hold: 200 * time.Millisecond,
	})
	if err != nil {
		fail(err)
	}
	if err := waitMembers(m, len(members)); err != nil {
		fail(err)
	}
	fmt.Println("ready")
	for sc.Scan() {
		var prefix string
		var n int
		if _, err := fmt.Sscanf(sc.Text(), "run %s %d", &prefix, &n); err != nil {
			fmt.Println("error", err)
			continue
		}
		fmt.Println(runSessions(m, prefix, n))
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	m.Close(cctx)
}

// waitMembers waits until m sees n members.
func waitMembers(m *cluster.Member, n int) error {
	seen := make(chan struct{}, 1)
	sub := m.System().EventStream.Subscribe(func(ev any) {
		if t, ok := ev.(*pacluster.ClusterTopology); ok && len(t.Members) >= n {
			select {
			case seen <- struct{}{}:
			default:
			}
		}
	})
	defer m.System().EventStream.Unsubscribe(sub)
	if len(m.Members()) >= n {
		return nil
	}
	select {
	case <-seen:
		return nil
	case <-time.After(time.Minute):
		return fmt.Errorf("%d of %d members after a minute", len(m.Members()), n)
	}
}

// runSessions runs n sessions at once and says "done" or the first error.
func runSessions(m *cluster.Member, prefix string, n int) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			id := prefix + "-" + strconv.Itoa(i)
			res, err := m.Run(ctx, id, messages.RawParam("", models.ParamMessages, json.RawMessage(`[{"role":"user","content":"work"}]`)))
			if err == nil && res.Text != "Done." {
				err = fmt.Errorf("session %s answered %q", id, res.Text)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return "error " + strings.ReplaceAll(err.Error(), "\n", " ")
	}
	return "done"
}

// clusterBench is a benchmark cluster of member processes, started on
// first use.
type clusterBench struct {
	pg      *pgServer
	members int
	once    sync.Once
	err     error
	procs   []*exec.Cmd
	stdins  []io.WriteCloser
	out     *bufio.Reader // the driving member's stdout
	runs    int
	// hostsKnown, if set, is called with the members' health-check
	// addresses once they are known, before the members join (a test
	// tries to take the ports there, as another process may).
	hostsKnown func(hosts []string)
	// env is added to the members' environment.
	env []string
}

// started starts the members on first use and says whether they did.
func (cb *clusterBench) started() error {
	cb.once.Do(func() { cb.err = cb.startMembers() })
	return cb.err
}

func (cb *clusterBench) startMembers() error {
	dsn, err := cb.pg.dsn()
	if err != nil {
		return err
	}
	schema := fmt.Sprintf("bench_cluster_%d", cb.pg.schema.Add(1))
	spec, _ := json.Marshal(memberSpec{DSN: dsn, Schema: schema})
	// Each member binds its health-check port itself and says which it
	// is; then every member is told them all.
	var hosts []string
	for i := range cb.members {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(append(os.Environ(), cb.env...), envMember+"="+string(spec))
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		cb.procs, cb.stdins = append(cb.procs, cmd), append(cb.stdins, stdin)
		out := bufio.NewReader(stdout)
		line, err := out.ReadString('\n')
		host, ok := strings.CutPrefix(strings.TrimSpace(line), "health ")
		if err != nil || !ok {
			return fmt.Errorf("bench cluster member %d: %q %v", i, line, err)
		}
		hosts = append(hosts, host)
		if cb.out == nil {
			cb.out = out
		} else {
			go io.Copy(io.Discard, out)
		}
	}
	if cb.hostsKnown != nil {
		cb.hostsKnown(hosts)
	}
	for i, stdin := range cb.stdins {
		if _, err := fmt.Fprintln(stdin, "hosts", strings.Join(hosts, " ")); err != nil {
			return fmt.Errorf("bench cluster member %d: %w", i, err)
		}
	}
	// The driver says ready once it sees every member.
	line, err := cb.out.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		return fmt.Errorf("bench cluster member: %q %v", line, err)
	}
	return nil
}

// benchSessions is one op: n sessions run at once to their answers.
func (cb *clusterBench) benchSessions(b *testing.B, n int) {
	if err := cb.started(); err != nil {
		b.Fatal(err)
	}
	run := func() {
		if err := cb.runOnce(n); err != nil {
			b.Fatal(err)
		}
	}
	run() // every member has joined and served
	b.ResetTimer()
	for range b.N {
		run()
	}
	b.StopTimer()
}

// runOnce has the driving member run n sessions at once to their answers.
func (cb *clusterBench) runOnce(n int) error {
	cb.runs++
	if _, err := fmt.Fprintf(cb.stdins[0], "run r%d %d\n", cb.runs, n); err != nil {
		return fmt.Errorf("bench cluster: %w", err)
	}
	line, err := cb.out.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "done" {
		return fmt.Errorf("bench cluster: %q %v", line, err)
	}
	return nil
}

func (cb *clusterBench) stop() {
	for i, cmd := range cb.procs {
		cb.stdins[i].Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(40 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}
}
