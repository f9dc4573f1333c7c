package resilience_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/models/resilience"
	"github.com/polyweave/polyweave-go/models/streaming"
)

// pipeNet is an HTTP server reached over in-memory connections
// (net.Pipe), so that a synctest bubble sees its waits: requests and
// responses cross it in the real wire format.
type pipeNet struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	srv   *http.Server
	tr    *http.Transport
}

func newPipeNet(handler http.Handler) *pipeNet {
	p := &pipeNet{conns: make(chan net.Conn), done: make(chan struct{})}
	p.srv = &http.Server{Handler: handler}
	p.tr = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		client, server := net.Pipe()
		select {
		case p.conns <- server:
			return client, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}
	go func() { _ = p.srv.Serve(p) }()
	return p
}

func (p *pipeNet) Accept() (net.Conn, error) {
	select {
	case c := <-p.conns:
		return c, nil
	case <-p.done:
		return nil, net.ErrClosed
	}
}

func (p *pipeNet) Close() error {
	p.once.Do(func() { close(p.done) })
	return nil
}

func (p *pipeNet) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80} }

func (p *pipeNet) stop() {
	p.tr.CloseIdleConnections()
	_ = p.srv.Close()
}

// get sends a GET through tr with ctx and returns the body it read.
func get(ctx context.Context, tr http.RoundTripper) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://model.test/", nil)
	if err != nil {
		return "", err
	}
	res, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return string(b), err
}

// TestTransport_RetryWaitIsNotIdle: a Retry-After longer than the idle
// bound of the answer is waited for without the bound firing: nothing is
// on the wire meanwhile.
func TestTransport_RetryWaitIsNotIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		served := 0
		p := newPipeNet(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			served++
			if served == 1 {
				w.Header().Set("Retry-After", "10")
				http.Error(w, "slow down", http.StatusTooManyRequests)
				return
			}
			_, _ = io.WriteString(w, "answer")
		}))
		defer p.stop()
		tr, err := resilience.New(p.tr, &resilience.Options{})
		if err != nil {
			t.Fatal(err)
		}
		b, ctx := streaming.Bound(context.Background(), time.Minute, 3*time.Second)
		defer b.Release()
		start := time.Now()
		body, err := get(ctx, tr)
		if err != nil {
			t.Fatalf("request failed after %v: %v", time.Since(start), b.Fail("request", err))
		}
		if body != "answer" || served != 2 || time.Since(start) < 10*time.Second {
			t.Fatalf("body %q after %d requests and %v", body, served, time.Since(start))
		}
		// The idle bound runs again once the request is back on the wire.
		p.srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		if _, err := get(ctx, tr); err == nil || !strings.Contains(b.Fail("request", err).Error(), "no data from the server for 3s") {
			t.Fatalf("stalled request: %v", err)
		}
	})
}

// TestTransport_QueueWaitIsNotIdle: a request waiting in line for a slot
// longer than the idle bound of its answer is sent when the slot frees.
func TestTransport_QueueWaitIsNotIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipeNet(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "answer")
		}))
		defer p.stop()
		tr, err := resilience.New(p.tr, &resilience.Options{MaxConcurrent: 1})
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodGet, "http://model.test/", nil)
		first, err := tr.RoundTrip(req) // holds the slot until its body is closed
		if err != nil {
			t.Fatal(err)
		}
		b, ctx := streaming.Bound(context.Background(), time.Minute, 3*time.Second)
		defer b.Release()
		type result struct {
			body string
			err  error
		}
		done := make(chan result, 1)
		go func() {
			body, err := get(ctx, tr)
			done <- result{body, err}
		}()
		time.Sleep(10 * time.Second) // fake time: the second request waits in line
		_ = first.Body.Close()
		r := <-done
		if r.err != nil || r.body != "answer" {
			t.Fatalf("queued request: %q, %v", r.body, b.Fail("request", r.err))
		}
	})
}
