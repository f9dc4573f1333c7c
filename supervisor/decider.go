package supervisor

import (
	"errors"
	"fmt"
)

// Decider chooses a directive for a failure. It runs on the supervising
// actor's goroutine; a Decider that panics is treated as answering Stop.
type Decider func(reason error) Directive

// Permanent is implemented by errors that restarting cannot cure (bad
// configuration, a closed store). [DefaultDecider] stops on them.
type Permanent interface {
	error
	Permanent() bool
}

// DefaultDecider restarts on every failure except errors that report
// themselves [Permanent], on which it stops.
func DefaultDecider(reason error) Directive {
	var p Permanent
	if errors.As(reason, &p) && p.Permanent() {
		return Stop
	}
	return Restart
}

// Rule maps failures of one kind to a directive; build rules with [On] and
// combine them with [Decide].
type Rule struct {
	match     func(error) bool
	directive Directive
}

// On is a rule that matches failures for which errors.As finds a T.
func On[T error](d Directive) Rule {
	return Rule{match: func(err error) bool { var t T; return errors.As(err, &t) }, directive: d}
}

// OnIs is a rule that matches failures for which errors.Is(err, target).
func OnIs(target error, d Directive) Rule {
	return Rule{match: func(err error) bool { return errors.Is(err, target) }, directive: d}
}

// Decide returns a Decider that applies the first matching rule and falls
// back to [DefaultDecider].
func Decide(rules ...Rule) Decider {
	return func(reason error) Directive {
		for _, r := range rules {
			if r.match(reason) {
				return r.directive
			}
		}
		return DefaultDecider(reason)
	}
}

// ReasonError turns a failure reason as protoactor reports it (any value
// that a panic carried) into an error. Errors are returned as they are.
func ReasonError(reason any) error {
	switch r := reason.(type) {
	case nil:
		return errors.New("unknown failure")
	case error:
		return r
	default:
		return fmt.Errorf("%v", r)
	}
}
