package actors

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// TestShell_StaleResumeOfEscalatedChildAfterRestart: p escalates its
// child c's failure; before p's supervisor resumes p, a sibling's failure
// restarts c (all-for-one), and c's next incarnation fails in its turn,
// its restart waiting for a backoff. p's Resume then resumes the child
// whose failure it escalated: that failure's incarnation has ended, and
// the later one waits for its supervisor's restart. The Resume is stale:
// c's later failure is answered by its restart (ERROR without a failure
// kind, END), not by a Resume nobody decided (ERROR of kind FailedKind),
// and a call written to c meanwhile waits for the incarnation after that
// restart.
func TestShell_StaleResumeOfEscalatedChildAfterRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const backoff = time.Hour
		atGate, gate := make(chan struct{}), make(chan struct{})
		rt := closedRuntime(t, &RuntimeOptions{
			Supervision: resumeAll(),
			OnSupervision: func(ev supervisor.Event) {
				if ev.Directive == supervisor.Resume && strings.HasSuffix(ev.Child, "/p") {
					close(atGate)
					<-gate // the host holds p's Resume
				}
			},
		})
		release := sync.OnceFunc(func() { close(gate) })
		t.Cleanup(release) // before the runtime is closed
		var starts atomic.Int32
		cSpec := Spec{Name: "c", New: func() Logic {
			return LogicFunc(func(c Context, msg any) {
				switch m := msg.(type) {
				case Started:
					starts.Add(1)
				case *messages.Frame:
					switch m.GetText() {
					case "fail":
						c.Fail(errors.New("boom"))
					case "fail2":
						c.Fail(errors.New("boom2"))
					}
					c.Emit(messages.Text(m.GetStreamId(), "served"))
					c.Emit(messages.End(m.GetStreamId()))
				}
			})
		}}
		refs := make(chan [2]Ref, 1)
		var got []string // what p got from c, in p's turns
		pSpec := Spec{Name: "p", Supervision: escalatingBoom(backoff), New: func() Logic {
			var c Ref
			return LogicFunc(func(ctx Context, msg any) {
				switch m := msg.(type) {
				case Started:
					c = mustSpawn(ctx, cSpec)
					refs <- [2]Ref{c, mustSpawn(ctx, siblingSpec())}
				case *messages.Frame:
					ctx.Send(c, messages.Text("f", "fail"))
				case ChildFrame:
					got = append(got, frameLabel(m.Frame))
				}
			})
		}}
		p, err := rt.Spawn(pSpec)
		if err != nil {
			t.Fatal(err)
		}
		cs := <-refs
		rt.Send(p, messages.Text("x", "go"))
		<-atGate // c failed, p escalated it: p waits for its supervisor
		rt.Send(cs[1], messages.Text("x", "sib"))
		time.Sleep(2 * backoff) // p restarts c and s after the backoff
		synctest.Wait()
		if n := starts.Load(); n != 2 {
			t.Fatalf("c was started %d times before its second failure, want 2", n)
		}
		rt.Send(cs[0], messages.Text("f2", "fail2"))
		synctest.Wait()                            // c's restart waits for its backoff
		rt.Send(cs[0], messages.Text("n", "call")) // waits for c's next incarnation
		release()                                  // p resumed: it resumes c, whose failure it escalated
		synctest.Wait()
		time.Sleep(4 * backoff) // c's restart
		synctest.Wait()
		var onC []string
		for _, g := range got {
			if strings.HasPrefix(g, "f2:") || strings.HasPrefix(g, "n:") {
				onC = append(onC, g)
			}
		}
		if want := []string{"f2:ERROR(boom2)", "f2:END", "n:TEXT(served)", "n:END"}; !slices.Equal(onC, want) {
			t.Errorf("c's later failed call and the call after it got %q, want %q (answered by c's restart)", onC, want)
		}
		if n := starts.Load(); n != 3 {
			t.Errorf("c was started %d times, want 3", n)
		}
	})
}
