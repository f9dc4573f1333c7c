package supervisor_test

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/supervisor"
)

// fakeSupervisor records what a strategy asks of it.
type fakeSupervisor struct {
	mu        sync.Mutex
	children  []*actor.PID
	restarted []string
	stopped   []string
	resumed   []string
	escalated []any
}

func (f *fakeSupervisor) Children() []*actor.PID { return f.children }
func (f *fakeSupervisor) EscalateFailure(reason, _ any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.escalated = append(f.escalated, reason)
}
func (f *fakeSupervisor) RestartChildren(pids ...*actor.PID) { f.record(&f.restarted, pids) }
func (f *fakeSupervisor) StopChildren(pids ...*actor.PID)    { f.record(&f.stopped, pids) }
func (f *fakeSupervisor) ResumeChildren(pids ...*actor.PID)  { f.record(&f.resumed, pids) }
func (f *fakeSupervisor) record(into *[]string, pids []*actor.PID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range pids {
		*into = append(*into, p.Id)
	}
}
func (f *fakeSupervisor) snapshot() (restarted, stopped []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.restarted), slices.Clone(f.stopped)
}

type configError struct{}

func (configError) Error() string   { return "bad config" }
func (configError) Permanent() bool { return true }

type flakyError struct{ n int }

func (e *flakyError) Error() string { return "flaky" }

func pid(id string) *actor.PID { return actor.NewPID("nonhost", id) }

func TestStrategy_RestartIntensity(t *testing.T) {
	var events []supervisor.Event
	s := supervisor.MustNew(&supervisor.Options{MaxRestarts: 2, Within: time.Hour,
		Observer: func(e supervisor.Event) { events = append(events, e) }})
	sup := &fakeSupervisor{}
	rs := actor.NewRestartStatistics()
	child := pid("a")
	for range 3 {
		s.HandleFailure(nil, sup, child, rs, errors.New("boom"), nil)
	}
	restarted, stopped := sup.snapshot()
	if !slices.Equal(restarted, []string{"a", "a"}) || !slices.Equal(stopped, []string{"a"}) {
		t.Fatalf("restarted %v stopped %v, want two restarts then a stop", restarted, stopped)
	}
	if len(events) != 3 {
		t.Fatalf("%d events, want 3", len(events))
	}
	last := events[2]
	if last.Directive != supervisor.Stop || !last.IntensityExceeded || last.Failures != 3 || last.Child != "a" {
		t.Fatalf("last event %+v", last)
	}
	if events[0].Directive != supervisor.Restart || events[0].IntensityExceeded {
		t.Fatalf("first event %+v", events[0])
	}
}

func TestStrategy_FailuresOutsideWindowDoNotCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := supervisor.MustNew(&supervisor.Options{MaxRestarts: 1, Within: time.Minute})
		sup := &fakeSupervisor{}
		rs := actor.NewRestartStatistics()
		s.HandleFailure(nil, sup, pid("a"), rs, errors.New("1"), nil)
		time.Sleep(2 * time.Minute) // fake time inside the bubble
		s.HandleFailure(nil, sup, pid("a"), rs, errors.New("2"), nil)
		if restarted, stopped := sup.snapshot(); len(restarted) != 2 || len(stopped) != 0 {
			t.Fatalf("restarted %v stopped %v: an old failure counted", restarted, stopped)
		}
	})
}

func TestStrategy_AllForOne(t *testing.T) {
	s := supervisor.MustNew(&supervisor.Options{Kind: supervisor.AllForOne})
	sup := &fakeSupervisor{children: []*actor.PID{pid("a"), pid("b"), pid("c")}}
	s.HandleFailure(nil, sup, pid("b"), actor.NewRestartStatistics(), errors.New("boom"), nil)
	if restarted, _ := sup.snapshot(); !slices.Equal(restarted, []string{"a", "b", "c"}) {
		t.Fatalf("restarted %v, want every child", restarted)
	}
}

// TestStrategy_AllForOneIntensityCountsTheSubtree: with AllForOne every
// failure restarts the whole subtree, and MaxRestarts bounds those
// restarts per supervisor. Counted in the failing child's
// RestartStatistics (protoactor keeps one per child), failures of a, b,
// a, b, a with MaxRestarts 2 restarted the subtree five times instead of
// stopping it at the third failure. Another supervisor's subtree is
// counted apart.
func TestStrategy_AllForOneIntensityCountsTheSubtree(t *testing.T) {
	var events []supervisor.Event
	s := supervisor.MustNew(&supervisor.Options{Kind: supervisor.AllForOne, MaxRestarts: 2, Within: time.Hour,
		Observer: func(e supervisor.Event) { events = append(events, e) }})
	a, b := pid("a"), pid("b")
	sup, other := &fakeSupervisor{children: []*actor.PID{a, b}}, &fakeSupervisor{children: []*actor.PID{pid("c")}}
	stats := map[*actor.PID]*actor.RestartStatistics{a: actor.NewRestartStatistics(), b: actor.NewRestartStatistics()}
	for i, child := range []*actor.PID{a, b, a} {
		s.HandleFailure(nil, sup, child, stats[child], errors.New("boom"), nil)
		if ev := events[len(events)-1]; (ev.Directive == supervisor.Restart) != (i < 2) || ev.Failures != i+1 {
			t.Fatalf("failure %d: %+v; want the third to stop the subtree", i+1, ev)
		}
	}
	s.HandleFailure(nil, other, pid("c"), actor.NewRestartStatistics(), errors.New("boom"), nil)
	if ev := events[len(events)-1]; ev.Directive != supervisor.Restart || ev.Failures != 1 {
		t.Fatalf("another supervisor's first failure: %+v", ev)
	}
	// The limit reached, the count starts again.
	s.HandleFailure(nil, sup, b, stats[b], errors.New("boom"), nil)
	if ev := events[len(events)-1]; ev.Directive != supervisor.Restart || ev.Failures != 1 {
		t.Fatalf("failure after the stop: %+v", ev)
	}
}

func TestStrategy_BackoffDelaysRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var backoffs []time.Duration
		s := supervisor.MustNew(&supervisor.Options{InitialBackoff: time.Second, MaxBackoff: 3 * time.Second,
			Observer: func(e supervisor.Event) { backoffs = append(backoffs, e.Backoff) }})
		sup := &fakeSupervisor{}
		rs := actor.NewRestartStatistics()
		s.HandleFailure(nil, sup, pid("a"), rs, errors.New("boom"), nil)
		synctest.Wait()
		if restarted, _ := sup.snapshot(); len(restarted) != 0 {
			t.Fatal("restarted before the back-off passed")
		}
		time.Sleep(time.Second) // fake time inside the bubble
		synctest.Wait()
		if restarted, _ := sup.snapshot(); len(restarted) != 1 {
			t.Fatal("not restarted after the back-off")
		}
		s.HandleFailure(nil, sup, pid("a"), rs, errors.New("boom"), nil)
		s.HandleFailure(nil, sup, pid("a"), rs, errors.New("boom"), nil)
		time.Sleep(time.Minute) // fake time inside the bubble: past both back-offs
		synctest.Wait()
		if want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}; !slices.Equal(backoffs, want) {
			t.Fatalf("backoffs %v, want %v (doubling, capped)", backoffs, want)
		}
	})
}

func TestDecide_TypedRules(t *testing.T) {
	decide := supervisor.Decide(
		supervisor.On[*flakyError](supervisor.Resume),
		supervisor.OnIs(errSentinel, supervisor.Escalate),
	)
	cases := []struct {
		err  error
		want supervisor.Directive
	}{
		{&flakyError{1}, supervisor.Resume},
		{errors.Join(errors.New("ctx"), &flakyError{2}), supervisor.Resume},
		{errSentinel, supervisor.Escalate},
		{configError{}, supervisor.Stop},
		{errors.New("anything else"), supervisor.Restart},
	}
	for _, tc := range cases {
		if got := decide(tc.err); got != tc.want {
			t.Errorf("decide(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

var errSentinel = errors.New("sentinel")

func TestStrategy_PanickingDeciderStops(t *testing.T) {
	s := supervisor.MustNew(&supervisor.Options{Decider: func(error) supervisor.Directive { panic("oops") }})
	sup := &fakeSupervisor{}
	s.HandleFailure(nil, sup, pid("a"), actor.NewRestartStatistics(), errors.New("boom"), nil)
	if _, stopped := sup.snapshot(); !slices.Equal(stopped, []string{"a"}) {
		t.Fatalf("stopped %v, want the child stopped", stopped)
	}
}

// TestStrategy_PanickingObserverStillDecides: an Observer that panics
// (and through the runtime every OnSupervision or WatchSupervision hook)
// is logged, the decision is carried out, and an observer added with
// WithObserver after it is still called. Unguarded, the panic unwound out
// of HandleFailure before the decision: the failed child was neither
// restarted nor stopped, and the supervising actor itself failed.
func TestStrategy_PanickingObserverStillDecides(t *testing.T) {
	var logs strings.Builder
	var after []supervisor.Event
	s := supervisor.MustNew(&supervisor.Options{Observer: func(supervisor.Event) { panic("observer bug") },
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}).
		WithObserver(func(e supervisor.Event) { after = append(after, e) })
	sup := &fakeSupervisor{}
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("HandleFailure panicked with the observer's panic: %v", r)
			}
		}()
		s.HandleFailure(nil, sup, pid("a"), actor.NewRestartStatistics(), errors.New("boom"), nil)
	}()
	if restarted, _ := sup.snapshot(); !slices.Equal(restarted, []string{"a"}) {
		t.Errorf("restarted %v, want the failed child restarted despite the observer", restarted)
	}
	if len(after) != 1 || after[0].Child != "a" {
		t.Errorf("the next observer got %+v, want the decision about a", after)
	}
	if !strings.Contains(logs.String(), "observer bug") {
		t.Errorf("the panic was not logged:\n%s", logs.String())
	}
}

func TestNew_RejectsBadOptions(t *testing.T) {
	for _, o := range []supervisor.Options{{Within: -1}, {InitialBackoff: -1}, {Kind: 7}} {
		if _, err := supervisor.New(&o); err == nil {
			t.Errorf("New(%+v) accepted bad options", o)
		}
	}
}

func TestReasonError(t *testing.T) {
	e := &flakyError{}
	if supervisor.ReasonError(e) != error(e) {
		t.Fatal("an error reason was not returned as it is")
	}
	if got := supervisor.ReasonError("text").Error(); got != "text" {
		t.Fatalf("got %q", got)
	}
}
