package tools

import (
	"fmt"
	"time"
)

// Defaults of [BreakerOptions].
const (
	DefaultBreakerFailures = 5
	DefaultBreakerWindow   = time.Minute
	DefaultBreakerCooldown = 30 * time.Second
)

// BreakerOptions configure the circuit breaker a dispatcher keeps per tool:
// once a tool has failed Failures times within Window (handler errors,
// timeouts, panics, restarts — not invalid arguments, not found or
// cancellations), its calls are answered "unavailable" without running
// until Cooldown has passed. After the cool-down one trial call runs:
// success closes the breaker, failure opens it again. A zero field means
// its default.
type BreakerOptions struct {
	Failures int
	Window   time.Duration
	Cooldown time.Duration
	// Disabled turns the breaker off.
	Disabled bool
	// OnChange, when set, is told each time a tool's breaker changes
	// state (telemetry.Telemetry.BreakerChanged records it as a gauge). It
	// runs on the dispatcher's goroutine: it must be quick and safe for
	// concurrent use.
	OnChange func(tool string, state BreakerState)
}

func (o BreakerOptions) withDefaults() (BreakerOptions, error) {
	if o.Failures < 0 || o.Window < 0 || o.Cooldown < 0 {
		return o, fmt.Errorf("breaker: negative option")
	}
	if o.Failures == 0 {
		o.Failures = DefaultBreakerFailures
	}
	if o.Window == 0 {
		o.Window = DefaultBreakerWindow
	}
	if o.Cooldown == 0 {
		o.Cooldown = DefaultBreakerCooldown
	}
	return o, nil
}

// BreakerState is the state of a [Breaker].
type BreakerState int

const (
	// BreakerClosed lets calls run.
	BreakerClosed BreakerState = iota
	// BreakerOpen answers calls "unavailable" without running them.
	BreakerOpen
	// BreakerHalfOpen lets one trial call run.
	BreakerHalfOpen
)

func (s BreakerState) String() string {
	switch s {
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half-open"
	}
	return "closed"
}

// Breaker is a circuit breaker driven by events: it reads no clock. Its
// owner reports failures and successes, and tells it when a failure has
// aged out of the window ([Breaker.Expire]) and when the cool-down is over
// ([Breaker.Cooled]); an actor does that with timers. The zero Breaker is
// closed with a threshold of [DefaultBreakerFailures]. Not safe for
// concurrent use.
type Breaker struct {
	// Threshold is the number of failures within the window that opens
	// the breaker; zero means DefaultBreakerFailures.
	Threshold int

	state   BreakerState
	recent  int  // failures still within the window
	trialOn bool // a half-open trial call is running
}

// State is the breaker's state.
func (b *Breaker) State() BreakerState { return b.state }

// Allow reports whether a call may run now. In the half-open state it
// admits one trial call at a time.
func (b *Breaker) Allow() bool {
	switch b.state {
	case BreakerOpen:
		return false
	case BreakerHalfOpen:
		if b.trialOn {
			return false
		}
		b.trialOn = true
	}
	return true
}

// Failure records a failed call. It reports whether the breaker opened
// because of it: the owner then schedules [Breaker.Cooled]. The owner also
// schedules one [Breaker.Expire] per failure, a window later.
func (b *Breaker) Failure() (opened bool) {
	b.recent++
	threshold := b.Threshold
	if threshold <= 0 {
		threshold = DefaultBreakerFailures
	}
	switch {
	case b.state == BreakerHalfOpen:
		b.state, b.trialOn = BreakerOpen, false
		return true
	case b.state == BreakerClosed && b.recent >= threshold:
		b.state = BreakerOpen
		return true
	}
	return false
}

// Success records a call that succeeded; a half-open breaker closes.
func (b *Breaker) Success() {
	if b.state == BreakerHalfOpen {
		b.state, b.trialOn, b.recent = BreakerClosed, false, 0
	}
}

// Expire says one failure has left the window.
func (b *Breaker) Expire() {
	if b.recent > 0 {
		b.recent--
	}
}

// Cooled says the cool-down after opening is over: the breaker goes
// half-open.
func (b *Breaker) Cooled() {
	if b.state == BreakerOpen {
		b.state, b.trialOn = BreakerHalfOpen, false
	}
}

// Neutral records the end of a call that neither succeeded nor failed in a
// way that says anything about the tool (invalid arguments, not found,
// cancelled): a half-open breaker admits the next trial call.
func (b *Breaker) Neutral() {
	if b.state == BreakerHalfOpen {
		b.trialOn = false
	}
}
