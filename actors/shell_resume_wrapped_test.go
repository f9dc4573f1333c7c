package actors

import (
	"slices"
	"sync/atomic"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// TestShell_ResumedWrapperResumesEscalatedInner: a wrapper's inner
// duplex fails, the wrapper's strategy escalates, and the runtime's
// resumes the wrapper, reached through a Conn or through a Mux. The
// inner duplex, suspended for its failure, is resumed with the wrapper:
// its failed call is answered (ERROR of kind FailedKind, END) and it
// serves the next call with the Logic it had.
func TestShell_ResumedWrapperResumesEscalatedInner(t *testing.T) {
	for _, viaMux := range []bool{false, true} {
		name := "conn"
		if viaMux {
			name = "mux"
		}
		t.Run(name, func(t *testing.T) {
			rt := startRuntimeWith(t, &RuntimeOptions{Supervision: resumeAll()})
			var starts atomic.Int32
			w := Wrap("w", failingChild(&starts, nil), func() Wrapped { return Hooks{} })
			w.Supervision = decidingAll(supervisor.Escalate)
			calls := []*messages.Frame{messages.Text("f", "fail"), messages.Text("g", "call")}
			var got []string
			ctx := testContext(t)
			if viaMux {
				mux, err := rt.StartMux(w)
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range calls {
					s := mustOpen(t, mux, c.GetStreamId())
					if err := s.Send(c); err != nil {
						t.Fatal(err)
					}
					for len(got) == 0 || got[len(got)-1] != c.GetStreamId()+":END" {
						f, err := s.Recv(ctx)
						if err != nil {
							t.Fatalf("Recv on %s: %v after %q", c.GetStreamId(), err, got)
						}
						got = append(got, frameLabel(f))
					}
					s.Release()
				}
			} else {
				conn, err := rt.Start(w)
				if err != nil {
					t.Fatal(err)
				}
				if err := conn.SendAll(calls...); err != nil {
					t.Fatal(err)
				}
				got = recvUntil(t, conn, "g", "END")
			}
			want := []string{"f:ERROR(boom)[" + FailedKind + "]", "f:END", "g:TEXT(served)", "g:END"}
			if !slices.Equal(got, want) {
				t.Errorf("got %q, want %q", got, want)
			}
			if n := starts.Load(); n != 1 {
				t.Errorf("the inner Logic was started %d times, want 1 (resumed)", n)
			}
		})
	}
}
