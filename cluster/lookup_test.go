package cluster

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	pacluster "github.com/asynkron/protoactor-go/cluster"
)

func members(ports ...int) []*pacluster.Member {
	var out []*pacluster.Member
	for _, p := range ports {
		out = append(out, &pacluster.Member{Host: "127.0.0.1", Port: int32(p), Id: fmt.Sprint(p), Kinds: []string{Kind}})
	}
	return out
}

// Identities spread evenly over members whose addresses differ in one
// digit, and a member that leaves takes only its own identities along.
func TestRendezvous_SpreadsAndMovesOnlyTheLeaversIdentities(t *testing.T) {
	three := newRendezvous(members(40001, 40002, 40003))
	two := newRendezvous(members(40001, 40002))
	const n = 3000
	count := map[string]int{}
	for i := range n {
		ci := &pacluster.ClusterIdentity{Kind: Kind, Identity: fmt.Sprintf("session-%d", i)}
		owner := three.owner(ci)
		count[owner]++
		if after := two.owner(ci); owner != "127.0.0.1:40003" && after != owner {
			t.Fatalf("%s moved from %s to %s though its member stayed", ci.Identity, owner, after)
		}
	}
	for addr, k := range count {
		// n/3 = 1000 each; a binomial's standard deviation is about 26.
		if k < 850 || k > 1150 {
			t.Errorf("%s owns %d of %d identities: %v", addr, k, n, count)
		}
	}
	if got := newRendezvous(nil).owner(&pacluster.ClusterIdentity{Kind: Kind, Identity: "x"}); got != "" {
		t.Errorf("owner among no members: %q", got)
	}
	other := &pacluster.ClusterIdentity{Kind: "other", Identity: "x"}
	if got := three.owner(other); got != "" {
		t.Errorf("owner of a kind no member hosts: %q", got)
	}
}

// An activation response is taken for an identity only when its PID is
// an activation of that identity on the owner asked, as placement names
// them (a late response to a request of an earlier process at this
// address may name another session's activation, or another member's).
func TestActivationOf(t *testing.T) {
	ci := pacluster.NewClusterIdentity("s1", Kind)
	for _, c := range []struct {
		address, id string
		want        bool
	}{
		{"a:1", placementName + "/s1$5", true},
		{"a:1", placementName + "/s1$aZ~", true},
		{"a:2", placementName + "/s1$5", false},
		{"a:1", placementName + "/s2$5", false},
		{"a:1", placementName + "/s1$5$6", false}, // of identity "s1$5"
		{"a:1", placementName + "/s10$5", false},
		{"a:1", placementName + "/s1$", false},
		{"a:1", placementName + "/s1$5/child", false},
		{"a:1", "future$5", false},
	} {
		pid := actor.NewPID(c.address, c.id)
		if got := activationOf(pid, "a:1", ci); got != c.want {
			t.Errorf("activationOf(%s/%s) = %v, want %v", c.address, c.id, got, c.want)
		}
	}
	if activationOf(nil, "a:1", ci) {
		t.Error("activationOf(nil) = true")
	}
}

// TestParseStatus_AnotherSessionsAnswer: an answer named for another
// session is never taken as this one's; when it is a stale activation's
// refusal, the error carries its reason.
func TestParseStatus_AnotherSessionsAnswer(t *testing.T) {
	refusal := statusFrame("t", status{State: stateMoved, Member: "m1",
		Error: `a run request for session "u" reached session "t"`})
	if _, err := parseStatus(refusal, nil, "u"); !errors.Is(err, errOtherSession) ||
		!strings.Contains(err.Error(), `reached session "t"`) {
		t.Errorf("refusal: %v, want errOtherSession with its reason", err)
	}
	done := statusFrame("t", status{State: stateDone, Text: "t's answer"})
	if st, err := parseStatus(done, nil, "u"); !errors.Is(err, errOtherSession) || st != nil {
		t.Errorf("another session's answer: %+v, %v, want errOtherSession", st, err)
	}
	if st, err := parseStatus(done, nil, "t"); err != nil || st.Text != "t's answer" {
		t.Errorf("own answer: %+v, %v", st, err)
	}
}
