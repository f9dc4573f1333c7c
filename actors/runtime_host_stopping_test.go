package actors

import (
	"errors"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// TestRuntime_StartWhileHostStops: a Start whose request the host takes
// while it stops (its Stop taken, its children stopping: a duplex busy in
// a turn has not stopped yet) is refused with ErrHostStopped. Spawned, the
// duplex would be a child its stopping parent never stops: the host
// would wait for it forever, or, under the name of a child that stopped,
// leave it running without a parent.
func TestRuntime_StartWhileHostStops(t *testing.T) {
	rt := startRuntime(t)
	entered, release := make(chan struct{}), make(chan struct{})
	busy := Spec{Name: "busy", New: func() Logic {
		return LogicFunc(func(_ Context, msg any) {
			if _, ok := msg.(*messages.Frame); ok {
				close(entered)
				<-release
			}
		})
	}}
	conn, err := rt.Start(busy)
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Send(messages.Text("s", "work")); err != nil {
		t.Fatal(err)
	}
	<-entered
	// The Stop is a system message, taken before the spawn request, which
	// comes after it: the host takes the request while it stops, waiting
	// for the busy duplex.
	rt.system.Root.Stop(rt.host)
	started, err := rt.Start(Spec{New: func() Logic { return LogicFunc(func(Context, any) {}) }})
	close(release)
	if err == nil {
		rt.system.Root.Stop(started.pid) // so that the host can stop
		t.Fatal("Start while the host stops succeeded: its duplex is a child the host does not stop")
	}
	if !errors.Is(err, ErrHostStopped) {
		t.Fatalf("Start while the host stops: %v, want ErrHostStopped", err)
	}
}
