package actors_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
)

// TestParent_StartMuxUnderTheWorkersActor: work started with Context.Go
// finds its actor with ParentFrom and starts a duplex as that actor's
// child; stopping the actor stops the child, and a start after the
// actor's incarnation ended fails with ErrParentStopped.
func TestParent_StartMuxUnderTheWorkersActor(t *testing.T) {
	rt := newRuntime(t, nil)
	ctx := testCtx(t)
	started := make(chan *actors.Mux, 1)
	late := make(chan error, 1)
	worker := actors.Spec{Name: "worker", New: func() actors.Logic {
		return actors.LogicFunc(func(c actors.Context, msg any) {
			if _, ok := msg.(*messages.Frame); !ok {
				return
			}
			c.Go("job", func(ctx context.Context, _ func(any)) any {
				p, ok := actors.ParentFrom(ctx)
				if !ok {
					late <- errors.New("no parent in the job's context")
					return nil
				}
				mux, err := p.StartMux(upper())
				if err != nil {
					late <- err
					return nil
				}
				started <- mux
				<-ctx.Done() // the worker's incarnation ended
				_, err = p.StartMux(upper())
				late <- err
				return nil
			})
		})
	}}
	conn, err := rt.Start(worker)
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Send(messages.Text("go", "work")); err != nil {
		t.Fatal(err)
	}
	var mux *actors.Mux
	select {
	case mux = <-started:
	case err := <-late:
		t.Fatal(err)
	case <-ctx.Done():
		t.Fatal("the job did not start its duplex")
	}
	if id := mux.Ref().PID().GetId(); !strings.HasPrefix(id, conn.Ref().PID().GetId()+"/") {
		t.Fatalf("child %s is not under the worker %s", id, conn.Ref().PID().GetId())
	}
	s, err := mux.Open("s1")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendAll(messages.Text("s1", "hi"), messages.End("s1")); err != nil {
		t.Fatal(err)
	}
	var got []*messages.Frame
	for len(got) < 2 {
		f, err := s.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, f)
	}
	if !slices.Equal(texts(got), []string{"HI", "<END>"}) {
		t.Fatalf("child answered %q", texts(got))
	}
	if err := conn.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(ctx); !errors.Is(err, actors.ErrDuplexStopped) {
		t.Fatalf("child after its parent stopped: %v, want ErrDuplexStopped", err)
	}
	select {
	case err := <-late:
		if !errors.Is(err, actors.ErrParentStopped) {
			t.Fatalf("start after the parent stopped: %v, want ErrParentStopped", err)
		}
	case <-ctx.Done():
		t.Fatal("the job's late start did not return")
	}
}
