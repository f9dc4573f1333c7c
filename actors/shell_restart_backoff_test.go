package actors

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// TestShell_StaleRestartIsDropped: a supervisor decides to restart a
// failed duplex after a backoff; the duplex is closed meanwhile, and a
// new duplex started under the same name. The restart, when its backoff
// ends, was for the closed duplex: it must not reach the new one, whose
// open call is then answered by its Logic, not closed with
// ERROR(restarted), and whose Logic is started once. The drop is
// logged: the decision was reported as a restart before it was dropped.
func TestShell_StaleRestartIsDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const backoff = time.Hour
		logs := &recordedLogs{}
		rt, err := NewRuntime(&RuntimeOptions{Supervision: supervisor.MustNew(&supervisor.Options{InitialBackoff: backoff}), Logger: slog.New(logs)})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := rt.Close(context.Background()); err != nil {
				t.Errorf("close runtime: %v", err)
			}
		}()
		var starts atomic.Int32
		spec := Spec{Name: "d", New: func() Logic {
			return LogicFunc(func(c Context, msg any) {
				switch m := msg.(type) {
				case Started:
					starts.Add(1)
				case *messages.Frame:
					switch {
					case m.GetText() == "fail":
						c.Fail(errors.New("boom"))
					case m.GetType() == messages.FrameType_END:
						c.Emit(messages.Text(m.GetStreamId(), "served"))
						c.Emit(messages.End(m.GetStreamId()))
					}
				}
			})
		}}
		old, err := rt.Start(spec)
		if err != nil {
			t.Fatal(err)
		}
		if err := old.Send(messages.Text("f", "fail")); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // failed; its restart waits for the backoff
		if err := old.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		d, err := rt.Start(spec)
		if err != nil {
			t.Fatal(err)
		}
		if d.Ref().String() != old.Ref().String() {
			t.Fatalf("the new duplex is %s, want the closed one's id %s", d.Ref(), old.Ref())
		}
		if err := d.Send(messages.Text("c", "hi")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * backoff) // the backoff ends: the stale restart is sent
		synctest.Wait()
		if err := d.Send(messages.End("c")); err != nil {
			t.Fatal(err)
		}
		var got []string
		for len(got) == 0 || got[len(got)-1] != "c:END" {
			f, err := d.Recv(context.Background())
			if err != nil {
				t.Fatalf("Recv: %v after %q", err, got)
			}
			got = append(got, f.GetStreamId()+":"+frameName(f))
		}
		if want := []string{"c:TEXT(served)", "c:END"}; !slices.Equal(got, want) {
			t.Errorf("the new duplex's call got %q, want %q", got, want)
		}
		if n := starts.Load(); n != 2 {
			t.Errorf("the Logic was started %d times, want 2 (the closed duplex's and the new one's)", n)
		}
		if !logs.has("supervision directive dropped", "child", old.Ref().String(), "directive", "restart") {
			t.Errorf("no log says the restart of %s was dropped; logged: %q", old.Ref(), logs.messages())
		}
	})
}

// recordedLogs is a slog handler that keeps the records logged (without
// the attributes of With).
type recordedLogs struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *recordedLogs) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordedLogs) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordedLogs) WithGroup(string) slog.Handler            { return h }
func (h *recordedLogs) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}

// has reports whether a record with message msg and the attributes of
// kv (key, value, ...) was logged.
func (h *recordedLogs) has(msg string, kv ...string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.recs {
		if r.Message != msg {
			continue
		}
		attrs := map[string]string{}
		r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
		match := true
		for i := 0; i+1 < len(kv); i += 2 {
			match = match && attrs[kv[i]] == kv[i+1]
		}
		if match {
			return true
		}
	}
	return false
}

// messages returns the messages logged.
func (h *recordedLogs) messages() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.recs {
		out = append(out, r.Message)
	}
	return out
}
