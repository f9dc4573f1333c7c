package main

import (
	"net"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
)

// TestClusterPortsCannotBeTaken starts figure 8's cluster of two members
// while another listener tries to take each member's health-check port as
// soon as the harness knows it, before the members start: as a process
// beside the benchmark may, by chance. The ports are the members' from the
// moment they are known, so the attempt fails and the cluster runs its
// sessions.
func TestClusterPortsCannotBeTaken(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL server and two member processes")
	}
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	pg := &pgServer{}
	defer pg.stop()
	cb := &clusterBench{pg: pg, members: 2}
	if raceDetector {
		// The members are this binary: the pinned protoactor cluster's
		// own data races (cluster/doc.go) go to files, not to the log.
		cb.env = []string{"GORACE=exitcode=0 log_path=" + filepath.Join(t.TempDir(), "race")}
	}
	defer cb.stop()
	var taken []net.Listener
	defer func() {
		for _, l := range taken {
			l.Close()
		}
	}()
	cb.hostsKnown = func(hosts []string) {
		if len(hosts) != 2 {
			t.Errorf("hosts %v, want 2", hosts)
		}
		for _, h := range hosts {
			if l, err := net.Listen("tcp", h); err == nil {
				taken = append(taken, l)
				t.Errorf("took %s before its member could", h)
			}
		}
	}
	if err := cb.started(); err != nil {
		t.Fatalf("cluster: %v", err)
	}
	if err := cb.runOnce(2); err != nil {
		t.Fatal(err)
	}
}
