package inspect_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/inspect"
	"github.com/polyweave/polyweave-go/tools"
)

// stuckWriter is the ResponseWriter of an event stream whose client
// stopped reading: once the first event is out, a Write blocks as a
// write to a full socket does, until the connection's write deadline
// passes (http.ResponseController.SetWriteDeadline) or the test ends.
type stuckWriter struct {
	header  http.Header
	entered chan struct{} // closed when a Write blocks
	release chan struct{} // closed at the test's end
	mu      sync.Mutex
	writes  int
	expired chan struct{} // closed once a past deadline is set
	once    sync.Once
	enter   sync.Once
}

func (w *stuckWriter) Header() http.Header { return w.header }
func (w *stuckWriter) WriteHeader(int)     {}
func (w *stuckWriter) Flush()              {}

func (w *stuckWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.writes++
	n := w.writes
	w.mu.Unlock()
	if n <= 2 { // "retry:" and the first event
		return len(p), nil
	}
	w.enter.Do(func() { close(w.entered) })
	select {
	case <-w.expired:
		return 0, os.ErrDeadlineExceeded
	case <-w.release:
		return 0, os.ErrDeadlineExceeded
	}
}

// SetWriteDeadline is what http.ResponseController.SetWriteDeadline
// calls on a connection's writer.
func (w *stuckWriter) SetWriteDeadline(t time.Time) error {
	if !t.IsZero() && !t.After(time.Now()) {
		w.once.Do(func() { close(w.expired) })
	}
	return nil
}

// TestEvents_CloseEndsStreamOfClientThatStoppedReading: Close "ends the
// event streams being served", so that a host's http.Server.Shutdown
// that follows it returns; a stream whose client stopped reading (its
// handler blocked writing an event) is ended too, not left blocked for
// as long as the connection lives.
func TestEvents_CloseEndsStreamOfClientThatStoppedReading(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	in, err := inspect.New(rt, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	w := &stuckWriter{header: http.Header{}, entered: make(chan struct{}), release: make(chan struct{}), expired: make(chan struct{})}
	t.Cleanup(func() { close(w.release) }) // before the runtime's leak check
	r := httptest.NewRequestWithContext(context.Background(), http.MethodGet, "http://127.0.0.1/api/events", nil)
	r.RemoteAddr, r.Host = "127.0.0.1:40000", "127.0.0.1"
	done := make(chan struct{})
	go func() {
		defer close(done)
		in.ServeHTTP(w, r)
	}()
	in.OnBreakerChange("echo", tools.BreakerOpen) // something new: a second event
	select {
	case <-w.entered:
	case <-done:
		t.Fatal("the event stream ended before its second event")
	}
	in.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second): // leakcheck's patience
		t.Fatal("Close did not end the event stream of a client that stopped reading: its handler is still blocked writing, 5 s after Close")
	}
}
