package cluster_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/tools/tooltest"
)

// TestEtcd_MemberThatCameAndWentWhileStartingIsNotSeen: member B
// registers and leaves while member A is held between its read of the
// members and its first watch. A's first watch replays B's put and delete
// in one response; B must not stay in A's view (a member that is gone,
// on which sessions would be placed).
func TestEtcd_MemberThatCameAndWentWhileStartingIsNotSeen(t *testing.T) {
	parallelLeakCheck(t)
	members := newEtcdMembers(t)
	a := members.spawn(t, childEtcdHoldEnv+"=1")
	nextMark(t, a, "read the members")
	b, addrB, _ := members.start(t)
	b.Stop(t)
	a.Send(t, "watch")
	addrA, _ := etcdReady(t, a)
	c, addrC, _ := members.start(t)
	for {
		view := strings.Split(nextMark(t, a, "topology "), ",")
		if slices.Contains(view, addrC) {
			if slices.Contains(view, addrB) {
				t.Errorf("A (%s) sees B (%s), which left before A watched, next to C (%s): %v", addrA, addrB, addrC, view)
			}
			break
		}
	}
	for _, m := range []*tooltest.Child{c, a} {
		m.Stop(t)
	}
	checkRaceReports(t, filepath.Dir(members.raceLog))
}
