package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
)

// countingSink is a protoactor process that counts the messages it gets
// and signals when it has seen want of them.
type countingSink struct {
	n    atomic.Int64
	want int64
	done chan struct{}
}

func (s *countingSink) SendUserMessage(*actor.PID, any) {
	if s.n.Add(1) == s.want {
		close(s.done)
	}
}
func (s *countingSink) SendSystemMessage(*actor.PID, any) {}
func (s *countingSink) Stop(*actor.PID)                   {}

type forwarder struct{ next *actor.PID }

func (f *forwarder) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*messages.Frame); ok {
		ctx.Send(f.next, m)
	}
}

// echo is the innermost duplex of a wrapper chain.
func echo() actors.Spec {
	return actors.Duplex("echo", func(f *messages.Frame, emit func(*messages.Frame)) { emit(f) })
}

// wrapperChain is n pass-through wrappers around an echo duplex: a frame
// makes 2n+1 actor hops.
func wrapperChain(n int) actors.Spec {
	spec := echo()
	for i := range n {
		spec = actors.Wrap(fmt.Sprintf("w%d", i), spec, func() actors.Wrapped { return actors.Hooks{} })
	}
	return spec
}

func benchBareHops(b *testing.B, hops int) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	defer system.Shutdown()
	sink := &countingSink{want: int64(b.N), done: make(chan struct{})}
	next, _ := system.ProcessRegistry.Add(sink, "sink")
	for range hops {
		f := &forwarder{next: next}
		next = system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return f }))
	}
	frame := messages.Text("s", "hello")
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for range b.N {
		system.Root.Send(next, frame)
	}
	<-sink.done
	b.StopTimer()
	reportFrames(b, processCPU()-cpu)
}

func benchWrapperHops(b *testing.B, wrappers int) {
	rt, err := actors.NewRuntime(runtimeOptions)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rt.Close(ctx)
	}()
	// The same counting sink as the bare chain, so that only the hops differ.
	sink := &countingSink{want: int64(b.N), done: make(chan struct{})}
	sinkPID, _ := rt.System().ProcessRegistry.Add(sink, "sink")
	spec := wrapperChain(wrappers)
	spec.Subscriber = actors.RefOf(sinkPID)
	chain, err := rt.Spawn(spec)
	if err != nil {
		b.Fatal(err)
	}
	frame := messages.Text("s", "hello")
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for range b.N {
		rt.Send(chain, frame)
	}
	<-sink.done
	b.StopTimer()
	reportFrames(b, processCPU()-cpu)
}

// reportFrames reports the frames per second of a chain body and the CPU
// time the process spent per frame: on a loaded machine, wall time
// measures the neighbours too, CPU time much less so.
func reportFrames(b *testing.B, cpu time.Duration) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/frame")
	}
}

// runtimeOptions are the options of the runtimes the bodies start (nil:
// the defaults); a benchmark comparing runtime settings sets it.
var runtimeOptions *actors.RuntimeOptions
