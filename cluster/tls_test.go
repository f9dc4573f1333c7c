package cluster_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/cluster"
	"github.com/polyweave/polyweave-go/remote"
	"github.com/polyweave/polyweave-go/remote/tlstest"
	"github.com/polyweave/polyweave-go/tools/tooltest"
)

// childTLSEnv makes this test binary a cluster member or client with
// mutual TLS (TestClusterTLSChild): "member ADDRESS CERT KEY CA" hosts
// one-call sessions at ADDRESS, its health checks on a port it binds
// itself; "client ADDRESS CERT KEY CA" joins as a client at ADDRESS, its
// members' health checks at childHostsEnv. childSchemaEnv and
// childSideEnv configure both.
const childTLSEnv = "POLYWEAVE_CLUSTER_TLS"

// TestClusterTLSChild is the body of a member or client with mutual TLS;
// it does nothing unless started by TestMember_TLS. It marks "ready
// ADDRESS HEALTH" once it has joined (a client's HEALTH is "-"). A client then runs the sessions its stdin
// names, one line "run ID TIMEOUT" each, and marks "ran ID MEMBER EPOCH
// TEXT", or "error ID ERR" ("deadline ERR" when the run's TIMEOUT
// passed). Either leaves when its stdin closes.
func TestClusterTLSChild(t *testing.T) {
	childMain(t, childTLSEnv, runTLSChild)
}

func runTLSChild(t *testing.T, v string) error {
	f := strings.Fields(v)
	if len(f) != 5 {
		return fmt.Errorf("%s=%q: want ROLE WHERE CERT KEY CA", childTLSEnv, v)
	}
	tlsOpts, err := remote.LoadTLS(f[2], f[3], f[4])
	if err != nil {
		return err
	}
	opts := &cluster.Options{Store: openStore(t, os.Getenv(childSchemaEnv)), TLS: tlsOpts, Hold: time.Second, Address: f[1]}
	health := "-"
	switch f[0] {
	case "member":
		opts.Provider, health = loneProviderAt(t)
		opts.Session = sessionFunc(t, 1, sideFile(os.Getenv(childSideEnv)), nil)
	case "client":
		opts.Client = true
		opts.Provider = cluster.Automanaged(0, strings.Split(os.Getenv(childHostsEnv), ","), 100*time.Millisecond)
	default:
		return fmt.Errorf("%s=%q: no role %q", childTLSEnv, v, f[0])
	}
	m, err := cluster.Start(opts)
	if err != nil {
		return err
	}
	mark := tooltest.Marker()
	mark("ready %s %s", m.Address(), health)
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		cmd := strings.Fields(sc.Text())
		if len(cmd) != 3 || cmd[0] != "run" {
			return fmt.Errorf("unknown command %q", sc.Text())
		}
		timeout, err := time.ParseDuration(cmd[2])
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		res, err := m.Run(ctx, cmd[1], firstRequest(cmd[1])...)
		cancel()
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			mark("deadline %v", err)
		case err != nil:
			mark("error %s %v", cmd[1], err)
		default:
			mark("ran %s %s %d %s", cmd[1], res.Member, res.Epoch, res.Text)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return m.Close(ctx)
}

// Cluster members and clients with mutual TLS reach one another: a
// client's run activates the session on the member, which answers it. A
// client whose certificate comes from another CA reaches no member: its
// run gets no answer, and no session runs for it. (Every process of the
// test is a child: a protoactor remote that starts replaces gRPC's global
// logger, racing with the gRPC goroutines of any other in the process.)
func TestMember_TLS(t *testing.T) {
	parallelLeakCheck(t)
	schema := freshSchema()
	side := newSideFile(t)
	raceLog := filepath.Join(t.TempDir(), "race")
	ca, other := tlstest.NewCA(t, "polyweave test CA"), tlstest.NewCA(t, "another CA")
	dir := t.TempDir()
	// Every process binds its ports itself, on port 0.
	env := []string{childSchemaEnv + "=" + schema, childSideEnv + "=" + string(side),
		"POLYWEAVE_TEST_POSTGRES=" + dsn, "GORACE=exitcode=0 log_path=" + raceLog}
	start := func(role string, files tlstest.Files, more ...string) (c *tooltest.Child, address, health string) {
		t.Helper()
		c = tooltest.StartChild(t, "^TestClusterTLSChild$", append(append(env, more...),
			childTLSEnv+"="+strings.Join([]string{role, "127.0.0.1:0", files.Cert, files.Key, files.CA}, " "))...)
		address, health = readyMark(t, c, role)
		return c, address, health
	}
	member, memberAddr, health := start("member", ca.WriteFiles(t, dir, "member"))
	client, _, _ := start("client", ca.WriteFiles(t, dir, "client"), childHostsEnv+"="+health)
	stranger, _, _ := start("client", other.WriteFiles(t, dir, "stranger", ca), childHostsEnv+"="+health)

	client.Send(t, "run s1 1m")
	if m, want := client.Mark(t), "ran s1 "+memberAddr+" 1 All done."; m != want {
		t.Errorf("the TLS client's run: %q, want %q", m, want)
	}
	stranger.Send(t, "run s2 5s")
	if m := stranger.Mark(t); !strings.HasPrefix(m, "deadline ") {
		t.Errorf("the client from another CA: %q, want no answer until its deadline", m)
	}
	stranger.Stop(t)
	client.Stop(t)
	member.Stop(t)
	checkRaceReports(t, filepath.Dir(raceLog))
	if got := side.runs(t); len(got) != 1 || got["s1 c1"] != 1 {
		t.Errorf("side effects %v, want s1 c1 once and nothing for the client from another CA", got)
	}
}

// A member refuses a TLS it cannot use, before it listens; with TLS it
// still listens on loopback only unless AllowRemote, and its refusal no
// longer says it has no authentication.
func TestStart_TLSConfig(t *testing.T) {
	leakCheck(t)
	ca := tlstest.NewCA(t, "polyweave test CA")
	store := openStore(t, freshSchema())
	start := func(address string, tlsOpts *remote.TLS) error {
		m, err := cluster.Start(&cluster.Options{Address: address, Store: store, Session: sessionFunc(t, 1, newSideFile(t), nil), TLS: tlsOpts,
			Provider: loneProvider(t)})
		if err == nil {
			_ = m.Close(context.Background())
		}
		return err
	}
	if err := start("", &remote.TLS{CAs: ca.Pool()}); !errors.Is(err, remote.ErrTLSConfig) || !strings.Contains(err.Error(), "Options.TLS") {
		t.Errorf("a member with a TLS without a certificate: %v, want ErrTLSConfig naming Options.TLS", err)
	}
	err := start("0.0.0.0:0", ca.TLS(t, "member"))
	if !errors.Is(err, remote.ErrNotLoopback) || !strings.Contains(err.Error(), "AllowRemote") || strings.Contains(err.Error(), "no authentication") {
		t.Errorf("a TLS member beyond loopback: %v, want ErrNotLoopback naming AllowRemote, without \"no authentication\"", err)
	}
}
