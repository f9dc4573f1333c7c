//go:build unix

package cluster_test

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestEtcd_PausedMemberIsExcluded: a member paused (SIGSTOP) for longer
// than its lease is seen to leave; when it resumes, the pinned protoactor
// never counts it again. The member says so: its Excluded channel is
// closed, and its Runs fail at once with ErrExcluded, rather than
// hosting nothing in silence.
func TestEtcd_PausedMemberIsExcluded(t *testing.T) {
	parallelLeakCheck(t)
	members := newEtcdMembers(t)
	a, addrA, _ := members.start(t)
	b, addrB, pidB := members.start(t)
	waitTopology(t, a, addrA, addrB)
	waitTopology(t, b, addrA, addrB)

	if err := syscall.Kill(pidB, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitTopology(t, a, addrA) // B's lease expired
	if err := syscall.Kill(pidB, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	b.Send(t, "excluded?")
	if got := nextMark(t, b, "excluded "); got != "yes" {
		t.Fatal("the resumed member, which the cluster no longer counts, did not say it was excluded")
	}
	b.Send(t, "run p1")
	if got := nextMark(t, b, "error p1 "); !strings.HasPrefix(got, "excluded=true ") {
		t.Errorf("Run from the excluded member: %s, want an error wrapping ErrExcluded", got)
	}
	// A, which never paused, is not told it is excluded, and still runs
	// sessions.
	a.Send(t, "run p2")
	if got := nextMark(t, a, "ran p2 "); !strings.HasPrefix(got, addrA+" ") {
		t.Errorf("session p2 run from A: on %s, want A", got)
	}
	b.Stop(t)
	a.Stop(t)
	checkRaceReports(t, filepath.Dir(members.raceLog))
}
