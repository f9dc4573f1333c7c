package actors

import (
	"context"
	"errors"
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
// serves the next call with the Logic it had. So is a duplex that a
// worker's job started under it (Parent.StartMux), when the worker's
// strategy escalates its failure.
func TestShell_ResumedWrapperResumesEscalatedInner(t *testing.T) {
	for _, via := range []string{"conn", "mux", "parent"} {
		t.Run(via, func(t *testing.T) {
			rt := startRuntimeWith(t, &RuntimeOptions{Supervision: resumeAll()})
			var starts atomic.Int32
			w := Wrap("w", failingChild(&starts, nil), func() Wrapped { return Hooks{} })
			w.Supervision = decidingAll(supervisor.Escalate)
			calls := []*messages.Frame{messages.Text("f", "fail"), messages.Text("g", "call")}
			var got []string
			ctx := testContext(t)
			if via != "conn" {
				spec := w
				if via == "parent" {
					spec = failingChild(&starts, nil) // fails, and escalates to the worker
				}
				mux, err := muxFor(t, rt, via, spec)
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

// muxFor starts spec on a Mux of rt (via "mux"), or (via "parent") as
// the duplex a worker's job starts under the worker, whose strategy
// escalates a failure of it: the worker is then what rt's strategy
// decides about.
func muxFor(t *testing.T, rt *Runtime, via string, spec Spec) (*Mux, error) {
	if via == "mux" {
		return rt.StartMux(spec)
	}
	type started struct {
		mux *Mux
		err error
	}
	ch := make(chan started, 1)
	worker := Spec{Name: "worker", Supervision: decidingAll(supervisor.Escalate), New: func() Logic {
		return LogicFunc(func(c Context, msg any) {
			if _, ok := msg.(Started); ok {
				c.Go(nil, func(ctx context.Context, _ func(any)) any {
					p, _ := ParentFrom(ctx)
					mux, err := p.StartMux(spec)
					ch <- started{mux, err}
					return nil
				})
			}
		})
	}}
	if _, err := rt.Spawn(worker); err != nil {
		return nil, err
	}
	select {
	case s := <-ch:
		return s.mux, s.err
	case <-testContext(t).Done():
		return nil, errors.New("the worker's job started no duplex")
	}
}
