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

	mu     sync.Mutex
	timed  context.Context // made by Done
	cancel context.CancelFunc
	ended  bool
}

func newSyncContext(call *messages.Frame, timeout time.Duration) *syncContext {
	c := &syncContext{call: call}
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
		c.timed, c.cancel = context.WithDeadline(context.Background(), c.deadline)
		if c.ended {
			c.cancel()
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
	case !time.Now().Before(c.deadline):
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
// whether its deadline had passed.
func (c *syncContext) end() (timedOut bool) {
	if c.deadline.IsZero() {
		return false
	}
	timedOut = c.Err() == context.DeadlineExceeded
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ended = true
	if c.cancel != nil {
		c.cancel()
	}
	return timedOut
}
