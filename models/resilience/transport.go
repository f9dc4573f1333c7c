package resilience

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MetaEvent is the name of the META frames adapters emit for an [Event]
// of their request (payload: the event as JSON).
const MetaEvent = "model_call"

// NoRetries, as Options.MaxRetries, turns retries off.
const NoRetries = -1

// Defaults of [Options].
const (
	DefaultMaxRetries = 3
	DefaultBaseDelay  = 500 * time.Millisecond
	DefaultMaxDelay   = 30 * time.Second
)

// Options configure a [Transport]. A nil *Options or a zero field means
// the default.
type Options struct {
	// MaxRetries is how many times a request is sent again; default
	// DefaultMaxRetries, NoRetries for none.
	MaxRetries int
	// BaseDelay is the back-off before the first retry; it doubles for
	// each next one, up to MaxDelay, and the wait is drawn at random
	// between half of it and all of it. Defaults DefaultBaseDelay and
	// DefaultMaxDelay. A Retry-After longer than MaxDelay is not waited
	// for: the response is returned as it is.
	BaseDelay, MaxDelay time.Duration
	// MaxConcurrent is how many requests may be in flight at once; 0
	// means no limit.
	MaxConcurrent int
	// OnEvent, when set, receives every event, on the goroutine of the
	// request; it must not block. The Error of a retry is the failed
	// attempt's, which may quote a credential of the request (a proxy
	// refusing a tunnel quotes in its reason what it was sent), with the
	// request's credentials cut out (see [WithRedaction]).
	OnEvent func(Event)
	// Sleep waits d or until ctx ends (returning ctx's error); default: a
	// timer. Tests make time an input with it.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Event is a wait in line or a retry.
type Event struct {
	// Kind is "queued" (the request waited for a slot; Wait says how
	// long) or "retry" (the request is sent again after Delay).
	Kind string `json:"kind"`
	// Attempt is the number of the attempt that failed (1 for the
	// first), for a retry.
	Attempt int `json:"attempt,omitempty"`
	// Status is the HTTP status that failed, or 0 for a connection error
	// (Error says which).
	Status int           `json:"status,omitempty"`
	Error  string        `json:"error,omitempty"`
	Delay  time.Duration `json:"delay_ns,omitempty"`
	Wait   time.Duration `json:"wait_ns,omitempty"`
	// InFlight is the number of requests holding a slot when the event
	// happened.
	InFlight int `json:"in_flight"`
}

type observerKey struct{}

// WithObserver returns a context whose requests report their events to
// observe as well (on the request's goroutine).
func WithObserver(ctx context.Context, observe func(Event)) context.Context {
	return context.WithValue(ctx, observerKey{}, observe)
}

type redactionKey struct{}

// WithRedaction returns a context whose requests have redact cut the
// credentials it knows of out of the Error of their events, before
// Options.OnEvent and the observer see it (the adapters of this module
// set it, with all a request carried on the wire). Without it, and
// before it, the Transport cuts out what it sees of the request: the
// credential of its Authorization and Proxy-Authorization headers (past
// the scheme), the user info of its URL, and its query string and each
// value of it, those of 8 bytes or more.
func WithRedaction(ctx context.Context, redact func(string) string) context.Context {
	return context.WithValue(ctx, redactionKey{}, redact)
}

// attemptError returns the text of err, the error of an attempt of req,
// with the credentials of req cut out (see WithRedaction).
func attemptError(req *http.Request, err error) string {
	text := err.Error()
	var secrets []string
	for _, name := range []string{"Authorization", "Proxy-Authorization"} {
		for _, v := range req.Header.Values(name) {
			v = strings.TrimSpace(v)
			if _, credential, ok := strings.Cut(v, " "); ok {
				v = strings.TrimSpace(credential)
			}
			secrets = append(secrets, v)
		}
	}
	if u := req.URL; u != nil {
		if u.User != nil {
			password, _ := u.User.Password()
			secrets = append(secrets, u.User.String(), u.User.Username(), password)
		}
		secrets = append(secrets, u.RawQuery)
		for pair := range strings.SplitSeq(u.RawQuery, "&") {
			_, value, _ := strings.Cut(pair, "=")
			secrets = append(secrets, value)
			if v, err := url.QueryUnescape(value); err == nil {
				secrets = append(secrets, v)
			}
		}
	}
	for _, s := range secrets {
		if len(s) >= minSecret {
			text = strings.ReplaceAll(text, s, "[redacted]")
		}
	}
	if redact, ok := req.Context().Value(redactionKey{}).(func(string) string); ok {
		text = redact(text)
	}
	return text
}

// minSecret is the length from which a credential the Transport sees is
// cut out of an event's Error: a shorter one would cut words.
const minSecret = 8

type waitsKey struct{}

// WithWaits returns a context whose requests call wait when they start
// waiting with nothing on the wire (in line for a slot, or between two
// attempts), and the function wait returned when that wait ends. The
// idle bound of a model adapter's answer
// ([github.com/polyweave/polyweave-go/models/streaming.Bound]) sets it,
// so that it only runs while the request is on the wire: a long wait in
// line or a long Retry-After does not read as a silent server.
func WithWaits(ctx context.Context, wait func() (done func())) context.Context {
	return context.WithValue(ctx, waitsKey{}, wait)
}

// Waiting says a wait of the request of ctx begins, with nothing on the
// wire (a Transport's, or the wait of a retry loop of its own, such as an
// SDK's); call the function it returns when the wait ends. Without
// [WithWaits] on ctx, it does nothing.
func Waiting(ctx context.Context) (done func()) {
	if wait, ok := ctx.Value(waitsKey{}).(func() func()); ok {
		return wait()
	}
	return func() {}
}

// Transport is a resilient http.RoundTripper. It is safe for concurrent
// use; create it with [New].
type Transport struct {
	base  http.RoundTripper
	opts  Options
	slots chan struct{} // nil without a limit

	mu       sync.Mutex
	inFlight int
}

// New returns a Transport sending through base (http.DefaultTransport
// when nil).
func New(base http.RoundTripper, opts *Options) (*Transport, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	switch {
	case o.MaxRetries < NoRetries || o.BaseDelay < 0 || o.MaxDelay < 0 || o.MaxConcurrent < 0:
		return nil, errors.New("resilience: negative retries, delay or concurrency in options")
	case o.MaxRetries == 0:
		o.MaxRetries = DefaultMaxRetries
	case o.MaxRetries == NoRetries:
		o.MaxRetries = 0
	}
	if o.BaseDelay == 0 {
		o.BaseDelay = DefaultBaseDelay
	}
	if o.MaxDelay == 0 {
		o.MaxDelay = DefaultMaxDelay
	}
	if o.Sleep == nil {
		o.Sleep = sleep
	}
	if base == nil {
		base = http.DefaultTransport
	}
	t := &Transport{base: base, opts: o}
	if o.MaxConcurrent > 0 {
		t.slots = make(chan struct{}, o.MaxConcurrent)
	}
	return t, nil
}

// Unwrap returns the transport t sends through, so that what it knows
// (the proxy of an *http.Transport) can be asked of it.
func (t *Transport) Unwrap() http.RoundTripper { return t.base }

// Client returns an HTTP client sending through t.
func (t *Transport) Client() *http.Client { return &http.Client{Transport: t} }

// InFlight returns the number of requests holding a slot.
func (t *Transport) InFlight() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.inFlight
}

func sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t *Transport) report(ctx context.Context, ev Event) {
	ev.InFlight = t.InFlight()
	if t.opts.OnEvent != nil {
		t.opts.OnEvent(ev)
	}
	if observe, ok := ctx.Value(observerKey{}).(func(Event)); ok {
		observe(ev)
	}
}

// acquire takes a slot, waiting in line when all are taken.
func (t *Transport) acquire(ctx context.Context) error {
	if t.slots == nil {
		return nil
	}
	var wait time.Duration
	select {
	case t.slots <- struct{}{}:
	default:
		start, done := time.Now(), Waiting(ctx)
		select {
		case t.slots <- struct{}{}:
			done()
		case <-ctx.Done():
			done()
			return ctx.Err()
		}
		wait = time.Since(start)
	}
	t.mu.Lock()
	t.inFlight++
	t.mu.Unlock()
	if wait > 0 {
		t.report(ctx, Event{Kind: "queued", Wait: wait})
	}
	return nil
}

func (t *Transport) release() {
	if t.slots == nil {
		return
	}
	t.mu.Lock()
	t.inFlight--
	t.mu.Unlock()
	<-t.slots
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if err := t.acquire(ctx); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	if t.slots == nil {
		t.mu.Lock()
		t.inFlight++
		t.mu.Unlock()
	}
	resp, err := t.send(req)
	if err != nil || resp.Body == nil {
		t.done()
		return resp, err
	}
	resp.Body = &releasingBody{ReadCloser: resp.Body, release: t.done}
	return resp, nil
}

// done gives the slot of a finished request back.
func (t *Transport) done() {
	if t.slots != nil {
		t.release()
		return
	}
	t.mu.Lock()
	t.inFlight--
	t.mu.Unlock()
}

// send sends req, retrying what may be retried.
func (t *Transport) send(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	for attempt := 1; ; attempt++ {
		try := req
		if attempt > 1 {
			try = req.Clone(ctx)
			if req.Body != nil && req.Body != http.NoBody {
				body, err := req.GetBody()
				if err != nil {
					return nil, fmt.Errorf("resilience: body for retry %d: %w", attempt-1, err)
				}
				try.Body = body
			}
		}
		resp, err := t.base.RoundTrip(try)
		last := attempt > t.opts.MaxRetries || ctx.Err() != nil ||
			(req.Body != nil && req.Body != http.NoBody && req.GetBody == nil)
		if last {
			return resp, err
		}
		ev := Event{Kind: "retry", Attempt: attempt}
		var after time.Duration
		switch {
		case err != nil:
			ev.Error = attemptError(try, err)
		case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
			ev.Status = resp.StatusCode
			var ok bool
			if after, ok = retryAfter(resp.Header); ok && after > t.opts.MaxDelay {
				return resp, nil // the server asks for longer than we wait
			}
		default:
			return resp, nil
		}
		delay := t.backoff(attempt)
		if after > delay {
			delay = after
		}
		ev.Delay = delay
		if resp != nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			_ = resp.Body.Close()
		}
		t.report(ctx, ev)
		done := Waiting(ctx)
		err = t.opts.Sleep(ctx, delay)
		done()
		if err != nil {
			return nil, err
		}
	}
}

// backoff is the jittered exponential delay before retry n (from 1).
func (t *Transport) backoff(n int) time.Duration {
	d := t.opts.BaseDelay
	for i := 1; i < n && d < t.opts.MaxDelay; i++ {
		d *= 2
	}
	d = min(d, t.opts.MaxDelay)
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// retryAfter reads retry-after-ms or Retry-After (seconds, or an HTTP
// date).
func retryAfter(h http.Header) (time.Duration, bool) {
	if v := h.Get("retry-after-ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return clampDuration(ms, time.Millisecond), true
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return clampDuration(s, time.Second), true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(time.Until(at), 0), true // Sub saturates: no overflow
	}
	return 0, false
}

// clampDuration is n units (n >= 0) as a Duration, the longest one when
// it does not fit: a plain conversion of a huge or infinite value would
// overflow, into a negative or small wait that would then be retried.
func clampDuration(n float64, unit time.Duration) time.Duration {
	if d := n * float64(unit); d < float64(math.MaxInt64) {
		return time.Duration(d)
	}
	return math.MaxInt64
}

// releasingBody gives the request's slot back when the body is closed.
type releasingBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}
