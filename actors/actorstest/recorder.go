// Package actorstest drives actor logic step by step without an actor
// system: a [Recorder] is an actors.Context that records what a Logic does.
package actorstest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
)

// Sent is a frame a Logic wrote into another duplex's sink.
type Sent struct {
	To    actors.Ref
	Frame *messages.Frame
}

// Job is work a Logic started with Go.
type Job struct {
	Key any
	Fn  func(ctx context.Context, progress func(any)) any
}

// TimerSet is a timer a Logic set with After.
type TimerSet struct {
	D   time.Duration
	Key any
}

// Recorder is an actors.Context that records effects instead of carrying
// them out. It is not safe for concurrent use; its zero value is ready.
type Recorder struct {
	Emitted []*messages.Frame
	Sent    []Sent
	Spawned []actors.Spec
	Stopped []actors.Ref
	Jobs    []Job
	Timers  []TimerSet
	// Failed is the error the Logic failed with, if it did.
	Failed error

	children int
}

// failed is the panic value Fail uses to unwind the Logic.
type failed struct{ err error }

// Deliver calls l.Receive(r, msg) and returns the error the Logic failed
// with (through Fail or a panic), if any.
func (r *Recorder) Deliver(l actors.Logic, msg any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if f, ok := p.(failed); ok {
				err = f.err
			} else {
				err = fmt.Errorf("panic: %v", p)
			}
			r.Failed = err
		}
	}()
	l.Receive(r, msg)
	return nil
}

// Reset forgets everything recorded so far (children keep their names).
func (r *Recorder) Reset() {
	*r = Recorder{children: r.children}
}

// RunJob runs the i-th recorded job to completion and returns the
// AsyncDone the Logic would receive.
func (r *Recorder) RunJob(ctx context.Context, i int) actors.AsyncDone {
	j := r.Jobs[i]
	return actors.AsyncDone{Key: j.Key, Value: j.Fn(ctx, func(any) {})}
}

// Emit implements actors.Context.
func (r *Recorder) Emit(f *messages.Frame) { r.Emitted = append(r.Emitted, f) }

// Send implements actors.Context.
func (r *Recorder) Send(to actors.Ref, f *messages.Frame) { r.Sent = append(r.Sent, Sent{to, f}) }

// Spawn implements actors.Context: it records spec and returns a new Ref.
func (r *Recorder) Spawn(spec actors.Spec) (actors.Ref, error) {
	if spec.New == nil {
		return actors.Ref{}, errors.New("spawn: spec has no New function")
	}
	r.children++
	r.Spawned = append(r.Spawned, spec)
	return ChildRef(r.children), nil
}

// ChildRef is the Ref the n-th Spawn of a Recorder returns (from 1).
func ChildRef(n int) actors.Ref {
	return actors.RefOf(actor.NewPID("recorder", fmt.Sprintf("recorder/child%d", n)))
}

// Stop implements actors.Context.
func (r *Recorder) Stop(child actors.Ref) { r.Stopped = append(r.Stopped, child) }

// Go implements actors.Context: it records the job without running it.
func (r *Recorder) Go(key any, fn func(ctx context.Context, progress func(any)) any) func() {
	r.Jobs = append(r.Jobs, Job{key, fn})
	return func() {}
}

// After implements actors.Context.
func (r *Recorder) After(d time.Duration, key any) func() bool {
	r.Timers = append(r.Timers, TimerSet{d, key})
	return func() bool { return true }
}

// Fail implements actors.Context: it unwinds the Logic to Deliver.
func (r *Recorder) Fail(err error) { panic(failed{err}) }

// Self implements actors.Context.
func (r *Recorder) Self() actors.Ref { return actors.RefOf(actor.NewPID("recorder", "recorder")) }

// Logger implements actors.Context: it discards.
func (r *Recorder) Logger() *slog.Logger { return slog.New(slog.DiscardHandler) }
