package httpadapter

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// stalledBody is a response body that sends nothing until the request's
// context ends, as a server that stalls after its status line.
type stalledBody struct{ ctx context.Context }

func (b stalledBody) Read([]byte) (int, error) { <-b.ctx.Done(); return 0, context.Cause(b.ctx) }
func (b stalledBody) Close() error             { return nil }

// attempt sends one attempt of req through BetweenRetries, answered with
// status and body by the "server".
func attempt(t *testing.T, req *http.Request, status int, body io.ReadCloser) *http.Response {
	t.Helper()
	res, err := BetweenRetries(req, func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: status, Body: body, Request: r}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestBetweenRetries_WaitBeforeRetryIsNotIdle: the SDK's wait between a
// failed attempt (whose body it closes unread) and the next does not
// count against the idle bound, however long; the next attempt has the
// whole bound again.
func TestBetweenRetries_WaitBeforeRetryIsNotIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := Open(Config{Timeout: time.Hour, IdleTimeout: time.Second})
		defer e.Close()
		b, ctx := e.Bound(t.Context())
		defer b.Release()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://api.test/v1", nil)
		res := attempt(t, req, http.StatusTooManyRequests, io.NopCloser(strings.NewReader(`{}`)))
		_ = res.Body.Close()
		time.Sleep(10 * time.Second) // the SDK's backoff, or the server's Retry-After
		if err := context.Cause(ctx); err != nil {
			t.Fatalf("failed during the wait before the retry: %v", err)
		}
		attempt(t, req, http.StatusOK, http.NoBody)
		time.Sleep(999 * time.Millisecond)
		if err := context.Cause(ctx); err != nil {
			t.Fatalf("the retry did not have the whole idle bound: %v", err)
		}
		time.Sleep(2 * time.Millisecond)
		if err := context.Cause(ctx); err == nil || !strings.Contains(err.Error(), "no data from the server for 1s") {
			t.Fatalf("the retry's stall ended with %v, want the idle bound", err)
		}
	})
}

// TestBetweenRetries_ErrorBodyReadIsBounded: the body of an error status
// that ends the request (not retried) is read by the SDK, on the wire:
// a server that stalls in it fails the request after the idle bound, not
// after the whole answer's timeout.
func TestBetweenRetries_ErrorBodyReadIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := Open(Config{Timeout: time.Hour, IdleTimeout: time.Second})
		defer e.Close()
		b, ctx := e.Bound(t.Context())
		defer b.Release()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://api.test/v1", nil)
		res := attempt(t, req, http.StatusBadRequest, stalledBody{ctx})
		_, err := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if err == nil || !strings.Contains(err.Error(), "no data from the server for 1s") {
			t.Fatalf("reading the stalled error body ended with %v, want the idle bound", err)
		}
	})
}
