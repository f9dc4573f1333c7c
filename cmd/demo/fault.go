package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// injector fires the one panic -crash asks for. It counts occurrences at
// its site (tool calls, tool results, model frames) and panics at the nth,
// once: the stage restarted by its supervisor then runs normally, so the
// run can heal. Its methods are safe for concurrent use; a nil *injector
// never fires.
type injector struct {
	at     crashPoint
	seen   atomic.Int64
	fired  atomic.Bool
	notify func(msg string) // tells the transcript, from the failing goroutine
}

// faultPanic is the value the injected panics carry.
type faultPanic struct{ what string }

func (p faultPanic) Error() string { return "injected fault: " + p.what }

// maybe panics if this occurrence at site is the chosen one.
func (in *injector) maybe(site crashSite, what string) {
	if in == nil || in.at.site != site {
		return
	}
	if in.seen.Add(1) != int64(in.at.n) || !in.fired.CompareAndSwap(false, true) {
		return
	}
	in.notify(fmt.Sprintf("panicking in %s", what))
	panic(faultPanic{what: what})
}

// Fired reports whether the panic has happened.
func (in *injector) Fired() bool { return in != nil && in.fired.Load() }

// wrapTools returns ts with handlers that may panic for -crash tool. The
// panic happens before the real handler runs, so the call has no effect.
func (in *injector) wrapTools(ts []*tools.Tool) ([]*tools.Tool, error) {
	if in == nil || in.at.site != crashTool {
		return ts, nil
	}
	out := make([]*tools.Tool, len(ts))
	for i, t := range ts {
		def := t.Definition()
		name, handler := def.Name, def.Handler
		def.Handler = func(ctx context.Context, args json.RawMessage) (any, error) {
			in.maybe(crashTool, fmt.Sprintf("the %s handler (tool call %d)", name, in.at.n))
			return handler(ctx, args)
		}
		var err error
		if out[i], err = tools.New(def); err != nil {
			return nil, fmt.Errorf("wrap tool %s: %w", name, err)
		}
	}
	return out, nil
}

// onToolResult is the loop's OnToolResult hook for -crash loop: a panic
// there fails the loop actor itself.
func (in *injector) onToolResult(ev tools.ToolResultEvent) {
	in.maybe(crashLoop, fmt.Sprintf("the tool loop reporting %s's result (tool result %d)", ev.Call.GetName(), in.at.n))
}

// wrapModel returns spec with a Logic that may panic as it emits a frame,
// for -crash model: the adapter actor fails mid-answer.
func (in *injector) wrapModel(spec actors.Spec) actors.Spec {
	if in == nil || in.at.site != crashModel {
		return spec
	}
	newLogic := spec.New
	spec.New = func() actors.Logic { return &faultyModel{inner: newLogic(), in: in} }
	return spec
}

// faultyModel runs a model adapter's Logic with an Emit that may panic.
type faultyModel struct {
	inner actors.Logic
	in    *injector
}

func (m *faultyModel) Receive(c actors.Context, msg any) {
	m.inner.Receive(faultyContext{Context: c, in: m.in}, msg)
}

// OnFailure lets the adapter answer for its open work, as it would alone.
func (m *faultyModel) OnFailure(c actors.Context, err error) {
	if h, ok := m.inner.(actors.FailureHandler); ok {
		h.OnFailure(c, err)
	}
}

type faultyContext struct {
	actors.Context
	in *injector
}

func (c faultyContext) Emit(f *messages.Frame) {
	c.crashAt(f)
	c.Context.Emit(f)
}

// EmitPassed lets a Logic under -crash model learn, through
// actors.EmitPassed, which of its frames the runtime let out, as it
// would without the injector; the injected panic fires here as in Emit.
func (c faultyContext) EmitPassed(f *messages.Frame) bool {
	c.crashAt(f)
	return actors.EmitPassed(c.Context, f)
}

func (c faultyContext) crashAt(f *messages.Frame) {
	c.in.maybe(crashModel, fmt.Sprintf("the model adapter emitting %s (model frame %d)", f.GetType(), c.in.at.n))
}

// withRetryTurn returns script with one more turn for -crash tool: right
// after the turn whose call the injected panic fails, the model, having
// read the error result, makes that call again (with a new id), as a real
// model would. Later turns move one place down. The script selects turns
// by conversation, so the turn a request gets still follows from how many
// answers it holds.
func withRetryTurn(script scripted.Script, at crashPoint) scripted.Script {
	if at.site != crashTool {
		return script
	}
	return retryCall(script, at.n, "failed: the tool crashed")
}

// retryCall returns script with a turn after the one that makes its nth
// call, in which the model, told that the call what, makes it again (with
// the id <id>_retry).
func retryCall(script scripted.Script, nth int, what string) scripted.Script {
	n := 0
	for i, turn := range script.Turns {
		for _, call := range turn.ToolCalls {
			if n++; n != nth {
				continue
			}
			call.ID += "_retry"
			call.Split, call.Chunks = 0, nil
			retry := scripted.Turn{
				Text:      fmt.Sprintf("The %s call %s. Trying it again.", call.Name, what),
				ToolCalls: []scripted.ToolCall{call},
			}
			turns := append([]scripted.Turn(nil), script.Turns[:i+1]...)
			turns = append(turns, retry)
			script.Turns = append(turns, script.Turns[i+1:]...)
			return script
		}
	}
	return script
}
