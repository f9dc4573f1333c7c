package actors

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// TestShell_RestartToldWhenCarriedOut: a supervisor decides to restart
// two failed duplexes after a backoff; one of them is closed meanwhile.
// OnSupervision and the supervision watchers hear of the restart that is
// carried out, once, before it happens, and not of the one dropped as
// stale (its duplex gone): what they are told of restarts is what
// happens. The duplexes' watchers see both fail as the decision is
// taken.
func TestShell_RestartToldWhenCarriedOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const backoff = time.Hour
		var mu sync.Mutex
		var told, watched []string
		tell := func(to *[]string) func(supervisor.Event) {
			return func(ev supervisor.Event) {
				mu.Lock()
				defer mu.Unlock()
				*to = append(*to, ev.Directive.String()+" "+ev.Child)
			}
		}
		rt := closedRuntime(t, &RuntimeOptions{
			Supervision:   supervisor.MustNew(&supervisor.Options{InitialBackoff: backoff}),
			OnSupervision: tell(&told),
		})
		defer rt.WatchSupervision(tell(&watched))()
		var failedSeen []string
		defer rt.WatchActors(func(ev ActorEvent) {
			if ev.Actor.State == ActorFailed {
				mu.Lock()
				failedSeen = append(failedSeen, ev.Actor.ID)
				mu.Unlock()
			}
		})()
		var starts sync.Map // Spec name: *int, the Logic's starts
		spec := func(name string) Spec {
			n := new(int)
			starts.Store(name, n)
			return Spec{Name: name, New: func() Logic {
				return LogicFunc(func(c Context, msg any) {
					switch m := msg.(type) {
					case Started:
						mu.Lock()
						*n++
						mu.Unlock()
					case *messages.Frame:
						if m.GetText() == "fail" {
							c.Fail(errors.New("boom"))
						}
					}
				})
			}}
		}
		gone, kept := spec("gone"), spec("kept")
		goneConn, err := rt.Start(gone)
		if err != nil {
			t.Fatal(err)
		}
		keptConn, err := rt.Start(kept)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []*Conn{goneConn, keptConn} {
			if err := c.Send(messages.Text("f", "fail")); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait() // both failed; their restarts wait for the backoff
		mu.Lock()
		if want := []string{goneConn.Ref().String(), keptConn.Ref().String()}; !slices.Equal(sorted(failedSeen), sorted(want)) {
			t.Errorf("the actor watchers saw %q fail, want %q", failedSeen, want)
		}
		mu.Unlock()
		if err := goneConn.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * backoff) // the backoff ends
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		want := []string{"restart " + keptConn.Ref().String()}
		if !slices.Equal(told, want) {
			t.Errorf("OnSupervision was told %q, want %q", told, want)
		}
		if !slices.Equal(watched, want) {
			t.Errorf("the supervision watcher was told %q, want %q", watched, want)
		}
		for name, want := range map[string]int{"gone": 1, "kept": 2} {
			n, _ := starts.Load(name)
			if got := *n.(*int); got != want {
				t.Errorf("%s's Logic was started %d times, want %d", name, got, want)
			}
		}
	})
}

// sorted returns a sorted copy of s.
func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
