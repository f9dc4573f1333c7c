package actors

import (
	"testing"
	"time"
)

// TestShell_FramesSkipProtoactorUnlessMetrics: a duplex's mailbox hands
// its frames to the shell directly, past protoactor's invocation, except
// on an actor system that records actor metrics, where protoactor's
// invocation is what records them.
func TestShell_FramesSkipProtoactorUnlessMetrics(t *testing.T) {
	for _, tc := range []struct {
		name    string
		metrics bool
	}{{"without metrics", false}, {"with metrics", true}} {
		t.Run(tc.name, func(t *testing.T) {
			rt, _ := startHostedRuntime(t, tc.metrics)
			direct := make(chan bool, 1)
			_, err := rt.Spawn(Spec{Name: "probe", New: func() Logic {
				return LogicFunc(func(c Context, msg any) {
					if _, ok := msg.(Started); ok {
						s := c.(*shell)
						direct <- s.mb.direct == s
					}
				})
			}})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case got := <-direct:
				if want := !tc.metrics; got != want {
					t.Errorf("frames handed to the shell directly: %v, want %v", got, want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the duplex never started")
			}
		})
	}
}
