package streaming

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/polyweave/polyweave-go/models/resilience"
)

// Bounds limits the time of one answer: the whole of it (Timeout) and the
// wait for each next piece of it (Idle). Create it with [Bound].
type Bounds struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   context.CancelFunc
	idle   time.Duration
	timer  *time.Timer

	mu       sync.Mutex
	waits    int  // waits of the request under way: the idle clock stands
	released bool // by Release: the idle clock stays stopped
}

// Bound returns bounds for an answer and the context to make its request
// with: it is cancelled when timeout has passed, or idle has passed since
// the start or the last [Bounds.Touch]. The idle clock stands while a
// resilience.Transport holds the request back (in line for a slot, or
// between attempts: see resilience.WithWaits), and starts again from
// zero when the request goes back on the wire. Release frees the timers.
func Bound(ctx context.Context, timeout, idle time.Duration) (*Bounds, context.Context) {
	b := &Bounds{idle: idle}
	ctx, b.cancel = context.WithCancelCause(ctx)
	ctx, b.stop = context.WithTimeoutCause(ctx, timeout, fmt.Errorf("no complete answer within %v", timeout))
	b.ctx = ctx
	b.timer = time.AfterFunc(idle, func() { b.cancel(fmt.Errorf("no data from the server for %v", idle)) })
	return b, resilience.WithWaits(ctx, b.wait)
}

// Touch says a piece of the answer arrived.
func (b *Bounds) Touch() {
	b.mu.Lock()
	if b.waits == 0 && !b.released {
		b.timer.Reset(b.idle)
	}
	b.mu.Unlock()
}

// wait stops the idle clock until the function it returns is called
// (by the last of the waits under way).
func (b *Bounds) wait() (done func()) {
	b.mu.Lock()
	if b.waits++; b.waits == 1 {
		b.timer.Stop()
	}
	b.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			b.waits--
			b.mu.Unlock()
			b.Touch() // the request is back on the wire: the clock starts anew
		})
	}
}

// Body returns body reading as it does and touching the idle bound at
// every read that returns bytes: whatever the server sends (SSE
// comments, keep-alive events a decoder skips) shows it is not stalled.
func (b *Bounds) Body(body io.ReadCloser) io.ReadCloser { return &touchingBody{body, b} }

type touchingBody struct {
	io.ReadCloser
	b *Bounds
}

func (t *touchingBody) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if n > 0 {
		t.b.Touch()
	}
	return n, err
}

// End ends the answer's context with cause, as a bound ends it: for a
// failure that no other attempt would mend (a client's retries, which
// stop once the context has ended, would repeat it), so that the
// answer's error is cause (see Fail).
func (b *Bounds) End(cause error) { b.cancel(cause) }

// Fail wraps err with op, replacing it with the cause of the context's
// end when a bound (or the caller) ended it: that is what tells why.
func (b *Bounds) Fail(op string, err error) error {
	if cause := context.Cause(b.ctx); cause != nil {
		err = cause
	}
	return fmt.Errorf("%s: %w", op, err)
}

// Release stops the timers and frees the context.
func (b *Bounds) Release() {
	b.mu.Lock()
	b.released = true
	b.timer.Stop()
	b.mu.Unlock()
	b.stop()
	b.cancel(nil)
}

// NewHTTPClient returns an HTTP client on a clone of
// http.DefaultTransport whose wait for response headers is bounded by
// idle: what adapters use when their options give no client.
func NewHTTPClient(idle time.Duration) *http.Client {
	transport := http.DefaultTransport
	if t, ok := transport.(*http.Transport); ok {
		t = t.Clone()
		t.ResponseHeaderTimeout = idle
		transport = t
	}
	return &http.Client{Transport: transport}
}
