package supervisor

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Directive is what a supervisor does with a failed child.
type Directive int

const (
	// Restart replaces the failed child with a fresh instance (the default).
	Restart Directive = iota
	// Resume lets the child go on with its state as it was.
	Resume
	// Stop stops the child and its subtree.
	Stop
	// Escalate fails the supervisor itself, handing the decision upwards.
	Escalate
)

func (d Directive) String() string {
	switch d {
	case Restart:
		return "restart"
	case Resume:
		return "resume"
	case Stop:
		return "stop"
	case Escalate:
		return "escalate"
	}
	return fmt.Sprintf("directive(%d)", int(d))
}

// Kind says which children a decision applies to.
type Kind int

const (
	// OneForOne applies a decision to the failed child only (the default).
	OneForOne Kind = iota
	// AllForOne applies a decision to every child of the supervisor.
	AllForOne
)

func (k Kind) String() string {
	if k == AllForOne {
		return "all-for-one"
	}
	return "one-for-one"
}

// Defaults for [Options].
const (
	DefaultMaxRestarts = 10
	DefaultWithin      = 10 * time.Second
)

// Options configure a [Strategy]. A nil *Options or a zero field means the
// default.
type Options struct {
	// Kind is OneForOne (default) or AllForOne.
	Kind Kind
	// MaxRestarts is how many restarts are allowed within Within before the
	// subtree is stopped instead; default DefaultMaxRestarts. Use
	// NoRestarts for "the first failure stops". OneForOne counts the
	// failures of each child apart; AllForOne, whose every restart
	// restarts all the children, counts those of all the children of a
	// supervisor together.
	MaxRestarts int
	// Within is the window over which restarts are counted; default
	// DefaultWithin.
	Within time.Duration
	// Backoff, when InitialBackoff > 0, delays the n-th restart within the
	// window by InitialBackoff * 2^(n-1), capped at MaxBackoff (default
	// 32 * InitialBackoff).
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	// Decider chooses the directive for a failure; default [DefaultDecider].
	Decider Decider
	// Observer is called with every decision, on the supervising actor's
	// goroutine, before the decision is carried out: it must be quick and
	// safe for concurrent use. An Observer that panics is logged (an ERROR
	// record to Logger, with the panic and its stack) and the decision is
	// carried out all the same: a broken observer must not take the
	// supervisor down.
	Observer func(Event)
	// Logger receives one record per decision; default: discard.
	Logger *slog.Logger
	// EscalateWhenExceeded, when set, makes a failure past the restart
	// intensity escalate (the supervisor fails itself with the child's
	// reason and its own supervisor decides) instead of stopping the
	// child. The event then has Directive Escalate and IntensityExceeded.
	EscalateWhenExceeded bool
}

// NoRestarts as Options.MaxRestarts means the first failure stops the child.
const NoRestarts = -1

// Event reports one supervision decision.
type Event struct {
	Time time.Time
	// Supervisor and Child are actor ids (paths) in the actor system.
	Supervisor string
	Child      string
	// Affected lists the ids the directive was applied to (all children for
	// all-for-one).
	Affected []string
	Reason   error
	// Directive is what was done. When the restart intensity was exceeded it
	// is Stop (Escalate with Options.EscalateWhenExceeded) and
	// IntensityExceeded is true.
	Directive         Directive
	IntensityExceeded bool
	// Failures is the number of failures counted within the window,
	// including this one (restart decisions only).
	Failures int
	// Backoff is the delay before the restart, if any.
	Backoff time.Duration
}

// Strategy is a supervisor strategy for protoactor actors. Its options
// are immutable after [New]; it is safe for concurrent use, and one
// Strategy may supervise any number of actors.
type Strategy struct {
	opts Options
	// subtrees counts the failures of AllForOne per supervisor; shared by
	// the copies WithObserver makes.
	subtrees *subtreeFailures
}

// subtreeFailures are the times of the failures counted within the
// window, per supervisor (AllForOne): protoactor keeps a count per child
// only.
type subtreeFailures struct {
	mu    sync.Mutex
	bySup map[any][]time.Time
}

// fail counts a failure of a child of sup at now and returns the
// failures within the window before it, this one included; entries of
// supervisors with no failure in the window are dropped.
func (f *subtreeFailures) fail(sup any, now time.Time, within time.Duration) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.bySup == nil {
		f.bySup = map[any][]time.Time{}
	}
	for k, times := range f.bySup {
		if k != sup && now.Sub(times[len(times)-1]) > within {
			delete(f.bySup, k)
		}
	}
	times := append(f.bySup[sup], now)
	i := 0
	for i < len(times) && now.Sub(times[i]) > within {
		i++
	}
	times = times[i:]
	f.bySup[sup] = times
	return len(times)
}

// reset forgets the failures counted for sup.
func (f *subtreeFailures) reset(sup any) {
	f.mu.Lock()
	delete(f.bySup, sup)
	f.mu.Unlock()
}

// subtreeKey identifies sup across decisions: its actor's *actor.PID
// when it tells it (the runtime's supervisors are new values per
// decision, and an actor's context keeps its PID value for its life),
// else sup itself when it can be a map key; nil when neither. The key is
// the *actor.PID pointer, not the address and id it holds: two actor
// systems of one process give theirs the same ("nonhost/team"), and so
// does an actor spawned again under the name of one that stopped, whose
// failures are not its own.
func subtreeKey(sup actor.Supervisor) any {
	if p, ok := sup.(interface{ Self() *actor.PID }); ok && p.Self() != nil {
		return p.Self()
	}
	if reflect.TypeOf(sup).Comparable() {
		return sup
	}
	return nil
}

var _ actor.SupervisorStrategy = (*Strategy)(nil)

// New returns a Strategy with opts applied. It returns an error for
// negative durations or an unknown Kind.
func New(opts *Options) (*Strategy, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Kind != OneForOne && o.Kind != AllForOne {
		return nil, fmt.Errorf("supervisor: unknown kind %d", int(o.Kind))
	}
	if o.Within < 0 || o.InitialBackoff < 0 || o.MaxBackoff < 0 {
		return nil, errors.New("supervisor: negative duration in options")
	}
	if o.MaxRestarts == 0 {
		o.MaxRestarts = DefaultMaxRestarts
	}
	if o.MaxRestarts < 0 {
		o.MaxRestarts = 0
	}
	if o.Within == 0 {
		o.Within = DefaultWithin
	}
	if o.InitialBackoff > 0 && o.MaxBackoff == 0 {
		o.MaxBackoff = 32 * o.InitialBackoff
	}
	if o.Decider == nil {
		o.Decider = DefaultDecider
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Strategy{opts: o, subtrees: &subtreeFailures{}}, nil
}

// MustNew is New for options known to be valid; it panics on error.
func MustNew(opts *Options) *Strategy {
	s, err := New(opts)
	if err != nil {
		panic(err)
	}
	return s
}

// Options returns a copy of the strategy's options with defaults applied.
func (s *Strategy) Options() Options { return s.opts }

// WithObserver returns a copy of s that also reports to observe (after any
// observer s already has; one that panics does not keep the other from
// being called).
func (s *Strategy) WithObserver(observe func(Event)) *Strategy {
	c := *s
	if prev := s.opts.Observer; prev != nil && observe != nil {
		logger := s.opts.Logger
		c.opts.Observer = func(e Event) { observeSafely(logger, prev, e); observe(e) }
	} else if observe != nil {
		c.opts.Observer = observe
	}
	return &c
}

// HandleFailure implements actor.SupervisorStrategy. It runs on the
// supervising actor's goroutine.
func (s *Strategy) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason, message any) {
	err := ReasonError(reason)
	ev := Event{Time: time.Now(), Child: child.GetId(), Reason: err, Directive: s.decide(err)}
	if p, ok := sup.(interface{ Self() *actor.PID }); ok {
		ev.Supervisor = p.Self().GetId()
	}

	targets := []*actor.PID{child}
	if s.opts.Kind == AllForOne && ev.Directive != Escalate {
		targets = sup.Children()
	}
	for _, t := range targets {
		ev.Affected = append(ev.Affected, t.GetId())
	}

	if ev.Directive == Restart {
		// AllForOne restarts the subtree: its failures count together.
		var subtree any
		if s.opts.Kind == AllForOne {
			subtree = subtreeKey(sup)
		}
		reset := rs.Reset
		if subtree != nil {
			ev.Failures = s.subtrees.fail(subtree, ev.Time, s.opts.Within)
			reset = func() { s.subtrees.reset(subtree) }
		} else {
			rs.Fail()
			ev.Failures = rs.NumberOfFailures(s.opts.Within)
		}
		switch {
		case ev.Failures > s.opts.MaxRestarts:
			reset()
			ev.IntensityExceeded = true
			ev.Directive = Stop
			if s.opts.EscalateWhenExceeded {
				ev.Directive = Escalate
			}
		default:
			ev.Backoff = s.backoff(ev.Failures)
		}
	}
	// Reported before it is carried out: what the children do next (a
	// restart's fresh incarnation, a stop) is seen by observers after the
	// decision that caused it, with its reason.
	s.report(ev)

	switch ev.Directive {
	case Resume:
		sup.ResumeChildren(targets...)
	case Restart:
		if ev.Backoff > 0 {
			time.AfterFunc(ev.Backoff, func() { sup.RestartChildren(targets...) })
		} else {
			sup.RestartChildren(targets...)
		}
	case Stop:
		sup.StopChildren(targets...)
	case Escalate:
		sup.EscalateFailure(reason, message)
	}
}

func (s *Strategy) decide(err error) (d Directive) {
	defer func() {
		if recover() != nil { // a broken decider must not take the supervisor down
			d = Stop
		}
	}()
	return s.opts.Decider(err)
}

func (s *Strategy) backoff(failures int) time.Duration {
	if s.opts.InitialBackoff <= 0 || failures < 1 {
		return 0
	}
	d := s.opts.InitialBackoff
	for i := 1; i < failures && d < s.opts.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, s.opts.MaxBackoff)
}

func (s *Strategy) report(ev Event) {
	s.opts.Logger.Warn("supervision",
		slog.String("supervisor", ev.Supervisor), slog.String("child", ev.Child),
		slog.String("directive", ev.Directive.String()), slog.Bool("intensity_exceeded", ev.IntensityExceeded),
		slog.Int("failures", ev.Failures), slog.Any("reason", ev.Reason))
	if s.opts.Observer != nil {
		observeSafely(s.opts.Logger, s.opts.Observer, ev)
	}
}

// observeSafely calls observe with ev, and logs a panic of it instead of
// letting it unwind the supervisor's decision: the decision is carried
// out whatever the observer does.
func observeSafely(logger *slog.Logger, observe func(Event), ev Event) {
	defer func() {
		if r := recover(); r != nil {
			logger.Error("supervision observer panicked; the decision is carried out",
				slog.String("supervisor", ev.Supervisor), slog.String("child", ev.Child),
				slog.String("directive", ev.Directive.String()), slog.Any("panic", r),
				slog.String("stack", string(debug.Stack())))
		}
	}()
	observe(ev)
}
