package inspect

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/tools"
)

// streamRecorder is the response of an event stream: what was written
// and how many flushes.
type streamRecorder struct {
	mu      sync.Mutex
	header  http.Header
	body    bytes.Buffer
	writes  int
	flushes int
}

func (r *streamRecorder) Header() http.Header { return r.header }
func (r *streamRecorder) WriteHeader(int)     {}

func (r *streamRecorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes++
	return r.body.Write(p)
}

func (r *streamRecorder) Flush() {
	r.mu.Lock()
	r.flushes++
	r.mu.Unlock()
}

// events returns the snapshots sent so far, with the writes and flushes.
func (r *streamRecorder) events(t *testing.T) (snaps []Snapshot, writes, flushes int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, block := range strings.Split(r.body.String(), "\n\n") {
		data, ok := strings.CutPrefix(block, "event: snapshot\ndata: ")
		if !ok {
			continue
		}
		var s Snapshot
		if err := json.Unmarshal([]byte(data), &s); err != nil {
			t.Fatalf("event data: %v", err)
		}
		snaps = append(snaps, s)
	}
	return snaps, r.writes, r.flushes
}

// The event stream coalesces: the changes made between two ticks of
// Options.Interval are sent as one event, written and flushed once, at
// the tick; a change wakes no goroutine (the stream looks at a counter
// when it ticks); a stream with nothing new sends nothing until its
// snapshot is stale (ages move on).
func TestEvents_ChangesCoalescedPerInterval(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	synctest.Test(t, func(t *testing.T) {
		const interval = 100 * time.Millisecond
		in, err := New(rt, &Options{Interval: interval})
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		rec := &streamRecorder{header: http.Header{}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			in.serveEvents(rec, httptest.NewRequest("GET", "/api/events", nil).WithContext(ctx))
		}()
		synctest.Wait()
		snaps, writes, flushes := rec.events(t)
		if len(snaps) != 1 || flushes != 1 {
			t.Fatalf("%d events, %d flushes at once, want the first snapshot, flushed", len(snaps), flushes)
		}

		// A burst of changes: nothing is sent until the tick.
		states := []tools.BreakerState{tools.BreakerOpen, tools.BreakerHalfOpen}
		for i := range 1000 {
			in.OnBreakerChange("flaky", states[i%2])
		}
		synctest.Wait()
		if snaps, _, _ := rec.events(t); len(snaps) != 1 {
			t.Fatalf("%d events before the tick, want the first alone", len(snaps))
		}
		time.Sleep(interval)
		synctest.Wait()
		snaps, w, f := rec.events(t)
		if len(snaps) != 2 || w-writes != 1 || f-flushes != 1 {
			t.Fatalf("%d events, %d writes and %d flushes for the burst, want one event, written and flushed once",
				len(snaps), w-writes, f-flushes)
		}
		if last := snaps[1]; len(last.Tools) != 1 || last.Tools[0].Breaker != "half-open" || last.Feed[0].Seq != 999 {
			t.Fatalf("the burst's event %+v, want its last change", last.Tools)
		}

		// Nothing new: nothing sent, until the snapshot is stale.
		writes, flushes = w, f
		time.Sleep(stale - 2*interval)
		synctest.Wait()
		if snaps, w, _ := rec.events(t); len(snaps) != 2 || w != writes {
			t.Fatalf("%d events, %d writes without changes, want none", len(snaps), w-writes)
		}
		time.Sleep(2 * interval)
		synctest.Wait()
		if snaps, w, f := rec.events(t); len(snaps) != 3 || w-writes != 1 || f-flushes != 1 {
			t.Fatalf("%d events, want a stale refresh, written and flushed once", len(snaps))
		}
		cancel()
		<-done
	})
}

// followEvents serves an event stream to rec until the returned func
// is called; it waits for the stream to end.
func followEvents(in *Inspector, rec http.ResponseWriter) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		in.serveEvents(rec, httptest.NewRequest("GET", "/api/events", nil).WithContext(ctx))
	}()
	return func() { cancel(); <-done }
}

// An Interval longer than a snapshot's staleness is respected: with or
// without changes, a stream gets a snapshot at most every Interval.
func TestEvents_LongIntervalRespected(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	synctest.Test(t, func(t *testing.T) {
		const interval = 5 * time.Second
		in, err := New(rt, &Options{Interval: interval})
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		rec := &streamRecorder{header: http.Header{}}
		stop := followEvents(in, rec)
		for range 10 { // a change every second
			time.Sleep(time.Second)
			in.OnBreakerChange("flaky", tools.BreakerOpen)
		}
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		if snaps, _, _ := rec.events(t); len(snaps) != 3 {
			t.Fatalf("%d events in 10s with changes, want 3 (at once, at 5s, at 10s)", len(snaps))
		}
		time.Sleep(10 * time.Second) // nothing new
		synctest.Wait()
		if snaps, _, _ := rec.events(t); len(snaps) != 5 {
			t.Fatalf("%d events in 20s, want 5 (one every 5s without changes)", len(snaps))
		}
		stop()
	})
}

// slowStart is a stream response whose first write takes a millisecond:
// the stream's clock of its last event runs a little behind the ticks.
type slowStart struct {
	streamRecorder
	started bool
}

func (r *slowStart) Write(p []byte) (int, error) {
	if !r.started {
		r.started = true
		time.Sleep(time.Millisecond)
	}
	return r.streamRecorder.Write(p)
}

// An event stamped a little after its tick does not make the next one a
// tick late: with the default Interval, a change is sent 250 ms after the
// last event, not 300.
func TestEvents_IntervalNotATickLate(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	synctest.Test(t, func(t *testing.T) {
		in, err := New(rt, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		in.clock.now() // ticking from now on: every 50 ms
		rec := &slowStart{streamRecorder: streamRecorder{header: http.Header{}}}
		stop := followEvents(in, rec)
		time.Sleep(2 * time.Millisecond) // the first event is out, at 1 ms
		synctest.Wait()
		if snaps, _, _ := rec.events(t); len(snaps) != 1 {
			t.Fatalf("%d events at once, want 1", len(snaps))
		}
		in.OnBreakerChange("flaky", tools.BreakerOpen)
		time.Sleep(DefaultInterval - 10*time.Millisecond) // past the tick at 200 ms
		synctest.Wait()
		if snaps, _, _ := rec.events(t); len(snaps) != 1 {
			t.Fatalf("%d events 200 ms after the first, want none yet", len(snaps)-1)
		}
		time.Sleep(10 * time.Millisecond) // past the tick at 250 ms
		synctest.Wait()
		if snaps, _, _ := rec.events(t); len(snaps) != 2 {
			t.Fatalf("%d events %v after the first, want the change's", len(snaps)-1, DefaultInterval)
		}
		stop()
	})
}
