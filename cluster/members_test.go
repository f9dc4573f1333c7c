package cluster_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/tools/tooltest"
)

// nextMark reads c's marks until one starts with prefix and returns the
// rest.
func nextMark(t *testing.T, c *tooltest.Child, prefix string) string {
	t.Helper()
	for {
		if rest, ok := strings.CutPrefix(c.Mark(t), prefix); ok {
			return rest
		}
	}
}

// waitTopology reads member c's marks (TestClusterEtcdChild's) until a
// "topology" mark names the members want, in any order.
func waitTopology(t *testing.T, c *tooltest.Child, want ...string) {
	t.Helper()
	joined := strings.Join(slices.Sorted(slices.Values(want)), ",")
	for nextMark(t, c, "topology ") != joined {
	}
}

// TestEtcd_MembersWhileJoining: members that start at the same time, each
// reading its view of the members (Member.Members) every millisecond
// from the moment it has started, see one another join, and then one
// leave, through it; the reads race with nothing, though each member's
// provider replaces protoactor's member list meanwhile: the race detector
// reports no race in this module's code in any member, nor one where
// Members reads protoactor's state.
func TestEtcd_MembersWhileJoining(t *testing.T) {
	parallelLeakCheck(t)
	members := newEtcdMembers(t)
	children := make([]*tooltest.Child, 3)
	for i := range children {
		children[i] = members.spawn(t, childEtcdPollEnv+"=1") // at once
	}
	addrs := make([]string, len(children))
	for i, c := range children {
		addrs[i], _ = etcdReady(t, c)
	}
	for _, c := range children {
		waitTopology(t, c, addrs...)
	}
	last := len(children) - 1
	children[last].Stop(t)
	for _, c := range children[:last] {
		waitTopology(t, c, addrs[:last]...)
	}
	for _, c := range children[:last] {
		c.Stop(t)
	}
	checkRaceReports(t, filepath.Dir(members.raceLog), "github.com/polyweave/polyweave-go/cluster.(*Member).Members()")
}

// TestEtcd_SeesMemberThatJoinedWhileItStarted: a member that registers
// while another starts, after that one has read the members and before it
// watches them, is not missed: the watch starts where the read ended. A
// waits there (childEtcdHoldEnv) while B starts; C starts once A is up,
// and A's first view with C has B too.
func TestEtcd_SeesMemberThatJoinedWhileItStarted(t *testing.T) {
	parallelLeakCheck(t)
	members := newEtcdMembers(t)
	a := members.spawn(t, childEtcdHoldEnv+"=1")
	nextMark(t, a, "read the members")
	b, addrB, _ := members.start(t)
	a.Send(t, "watch")
	addrA, _ := etcdReady(t, a)
	c, addrC, _ := members.start(t)
	for {
		view := strings.Split(nextMark(t, a, "topology "), ",")
		if slices.Contains(view, addrC) {
			if !slices.Contains(view, addrB) {
				t.Errorf("A (%s) sees C (%s) but not B (%s), which registered while A started: %v", addrA, addrC, addrB, view)
			}
			break
		}
	}
	for _, m := range []*tooltest.Child{c, b, a} {
		m.Stop(t)
	}
	checkRaceReports(t, filepath.Dir(members.raceLog))
}
