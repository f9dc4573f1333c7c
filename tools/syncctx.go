package tools

import (
	"context"
	"sync"
	"time"

	"github.com/polyweave/polyweave-go/messages"
)

// syncContext is the context of a Sync handler run in its caller's turn
// (callInline, a tool actor's sync call). It carries the call and the
// deadline without allocating anything else: the done channel and its
// timer, which most handlers never ask for, are made only when Done is
// called. Once the handler has returned (end), it is cancelled, as a
// context.WithTimeout's cancel would.
type syncContext struct {
	call     *messages.Frame
	deadline time.Time // zero: none, never done

	mu    sync.Mutex
	timed *timedContext // made by Done
	ended bool
}

// timedContext is the done channel's context of a syncContext and its
// cancel, apart so that a syncContext whose Done is never called (most)
// fits in 64 bytes.
type timedContext struct {
	context.Context
	cancel context.CancelFunc
}

func newSyncContext(call *messages.Frame, timeout time.Duration) *syncContext {
	return new(syncContext).init(call, timeout)
}

// init sets up c, a zero syncContext, for call and returns it.
func (c *syncContext) init(call *messages.Frame, timeout time.Duration) *syncContext {
	c.call = call
	if timeout > 0 {
		c.deadline = time.Now().Add(timeout)
	}
	return c
}

// Deadline implements context.Context.
func (c *syncContext) Deadline() (time.Time, bool) { return c.deadline, !c.deadline.IsZero() }

// Done implements context.Context.
func (c *syncContext) Done() <-chan struct{} {
	if c.deadline.IsZero() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timed == nil {
		ctx, cancel := context.WithDeadline(context.Background(), c.deadline)
		c.timed = &timedContext{Context: ctx, cancel: cancel}
		if c.ended {
			cancel()
		}
	}
	return c.timed.Done()
}

// Err implements context.Context.
func (c *syncContext) Err() error {
	if c.deadline.IsZero() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.timed != nil:
		return c.timed.Err()
	case time.Until(c.deadline) <= 0: // the monotonic clock alone
		return context.DeadlineExceeded
	case c.ended:
		return context.Canceled
	}
	return nil
}

// Value implements context.Context: the call for CallFrom, and what the
// done channel's context holds once made.
func (c *syncContext) Value(key any) any {
	if key == (callInfoKey{}) {
		return c.call
	}
	if c.deadline.IsZero() {
		return nil
	}
	c.mu.Lock()
	timed := c.timed
	c.mu.Unlock()
	if timed == nil {
		return nil
	}
	return timed.Value(key)
}

// end cancels the context once the handler has returned and reports
// whether its deadline had passed. It takes the lock once, and reads
// only the monotonic clock. The clock tells, not the done channel's
// context when Done made one: its timer closes the channel a moment
// after the deadline, and a handler that returned at the deadline
// overran it as much as one that never asked for the channel.
func (c *syncContext) end() (timedOut bool) {
	if c.deadline.IsZero() {
		return false
	}
	c.mu.Lock()
	timedOut = time.Until(c.deadline) <= 0
	if c.timed != nil {
		c.timed.cancel()
	}
	c.ended = true
	c.mu.Unlock()
	return timedOut
}
