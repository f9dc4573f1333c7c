// AllForOne counts the failures of each supervisor apart, also when two
// supervisors have the same PID id: one per actor system of a process
// ("nonhost/team" in both), or one spawned again under the name of one
// that stopped.
package supervisor_test

import (
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/polyweave/polyweave-go/supervisor"
)

type selfSupervisor struct {
	fakeSupervisor
	self *actor.PID
}

func (s *selfSupervisor) Self() *actor.PID { return s.self }

func TestStrategy_AllForOneCountsApartAcrossSystems(t *testing.T) {
	var events []supervisor.Event
	s := supervisor.MustNew(&supervisor.Options{Kind: supervisor.AllForOne, MaxRestarts: 2, Within: time.Hour,
		Observer: func(e supervisor.Event) { events = append(events, e) }})
	// Two actor systems in one process, each with a supervisor "host/team".
	sys1 := &selfSupervisor{fakeSupervisor: fakeSupervisor{children: []*actor.PID{pid("host/team/a")}}, self: pid("host/team")}
	sys2 := &selfSupervisor{fakeSupervisor: fakeSupervisor{children: []*actor.PID{pid("host/team/a")}}, self: pid("host/team")}
	s.HandleFailure(nil, sys1, pid("host/team/a"), actor.NewRestartStatistics(), errors.New("boom"), nil)
	s.HandleFailure(nil, sys1, pid("host/team/a"), actor.NewRestartStatistics(), errors.New("boom"), nil)
	s.HandleFailure(nil, sys2, pid("host/team/a"), actor.NewRestartStatistics(), errors.New("boom"), nil)
	if ev := events[len(events)-1]; ev.Directive != supervisor.Restart || ev.Failures != 1 {
		t.Fatalf("the other system's supervisor's first failure: %+v (counted with the first system's)", ev)
	}
	// The first system's supervisor stopped and spawned again: a new PID
	// value of the same id.
	again := &selfSupervisor{fakeSupervisor: fakeSupervisor{children: []*actor.PID{pid("host/team/a")}}, self: pid("host/team")}
	s.HandleFailure(nil, again, pid("host/team/a"), actor.NewRestartStatistics(), errors.New("boom"), nil)
	if ev := events[len(events)-1]; ev.Directive != supervisor.Restart || ev.Failures != 1 {
		t.Fatalf("a supervisor spawned again under the same name, first failure: %+v (counted with its predecessor's)", ev)
	}
	// The same supervisor's failures still count together.
	s.HandleFailure(nil, sys1, pid("host/team/a"), actor.NewRestartStatistics(), errors.New("boom"), nil)
	if ev := events[len(events)-1]; ev.Directive != supervisor.Stop || ev.Failures != 3 {
		t.Fatalf("the first system's supervisor's third failure: %+v, want it to stop the subtree", ev)
	}
}
