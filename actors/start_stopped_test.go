package actors

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/supervisor"
)

// TestStart_DuplexGoneAtOnceEndsRecv: a duplex that fails as it starts,
// under a supervisor that stops it at its first failure, may be gone
// before Start or StartMux has the caller watch it; the Conn, or the
// Mux, learns all the same that the duplex stopped: Recv returns
// ErrDuplexStopped rather than waiting until its ctx ends. The race is
// run many times; each Recv waits 2 s at most (the race is lost most
// often under the race detector).
func TestStart_DuplexGoneAtOnceEndsRecv(t *testing.T) {
	rt := startRuntimeWith(t, &RuntimeOptions{
		Supervision: supervisor.MustNew(&supervisor.Options{MaxRestarts: supervisor.NoRestarts})})
	spec := Spec{Name: "failing", New: func() Logic {
		return LogicFunc(func(c Context, msg any) {
			if _, ok := msg.(Started); ok {
				c.Fail(errors.New("cannot start"))
			}
		})
	}}
	const runs = 200
	t.Run("Conn", func(t *testing.T) {
		hung := 0
		for range runs {
			conn, err := rt.Start(spec)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err = conn.Recv(ctx)
			cancel()
			if !errors.Is(err, ErrDuplexStopped) {
				hung++
			}
		}
		if hung > 0 {
			t.Errorf("%d of %d Conns of a duplex that stopped as it started: Recv did not return ErrDuplexStopped", hung, runs)
		}
	})
	t.Run("Mux", func(t *testing.T) {
		hung := 0
		for range runs {
			mux, err := rt.StartMux(spec)
			if err != nil {
				t.Fatal(err)
			}
			s, err := mux.Open("s")
			if errors.Is(err, ErrDuplexStopped) {
				continue // the Mux knows already
			}
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err = s.Recv(ctx)
			cancel()
			s.Release()
			if !errors.Is(err, ErrDuplexStopped) {
				hung++
			}
		}
		if hung > 0 {
			t.Errorf("%d of %d Muxes of a duplex that stopped as it started: Recv did not return ErrDuplexStopped", hung, runs)
		}
	})
}
