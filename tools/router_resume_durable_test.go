package tools_test

import (
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
	"github.com/polyweave/polyweave-go/tools"
)

// startResumedDurableRouter is startResumedRouter with a durable router
// (on a memstore).
func startResumedDurableRouter(t *testing.T, model func(got chan<- *messages.Frame) actors.Spec) (*actors.Conn, chan *messages.Frame) {
	t.Helper()
	_, tool := newArgsTool(t)
	got := make(chan *messages.Frame, 16)
	spec, err := tools.NewStreamingRouter(model(got), &tools.RouterOptions{Name: "router", Tools: []*tools.Tool{tool},
		Durability: &tools.DurabilityOptions{Store: memstore.New(nil), WrapperID: "r1"}})
	if err != nil {
		t.Fatal(err)
	}
	newLogic := spec.New
	spec.New = func() actors.Logic { return routerFailsOnBoom{newLogic().(*actors.WrapperLogic)} }
	rt := actorstest.NewRuntime(t, &actors.RuntimeOptions{Supervision: supervisor.MustNew(&supervisor.Options{
		Decider: func(error) supervisor.Directive { return supervisor.Resume }})})
	return start(t, rt, spec), got
}

// TestDurableRouter_KeepsTheStreamsItsRuntimeKeepsThroughAResume is
// TestStreamingRouter_KeepsTheStreamsItsRuntimeKeepsThroughAResume with a
// durable router, whose runtime notes every call-opening frame.
func TestDurableRouter_KeepsTheStreamsItsRuntimeKeepsThroughAResume(t *testing.T) {
	conn, got := startResumedDurableRouter(t, cancelEndsModel)
	keepsTheStreamsItsRuntimeKeepsThroughAResume(t, conn, got)
}

// TestDurableRouter_EndsWithItsRuntimeACallAResumeAnsweredAlone is
// TestStreamingRouter_EndsWithItsRuntimeACallAResumeAnsweredAlone with a
// durable router.
func TestDurableRouter_EndsWithItsRuntimeACallAResumeAnsweredAlone(t *testing.T) {
	conn, got := startResumedDurableRouter(t, startModel)
	endsWithItsRuntimeACallAResumeAnsweredAlone(t, conn, got)
}
