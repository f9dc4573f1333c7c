package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
)

// TestShutdown_GivesUpOnAStuckProcessor: a span processor's OnEnd blocks
// with spans still queued behind it. Shutdown returns its context's error
// once the context is cancelled; the recorder then hands nothing more to
// the processor: when the blocked OnEnd returns, the recorder goroutine
// returns too (it is not left waiting on the processor for each span
// still queued), and no goroutine is left.
func TestShutdown_GivesUpOnAStuckProcessor(t *testing.T) {
	tel, stall := stalledTelemetry(t, Options{}, nil, true)
	c := nullContext{self: actors.RefOf(actor.NewPID("test", "agent"))}
	agent := &agentObserver{t: tel, name: "a"}
	agent.in(c, messages.RawParam("s1", "messages", json.RawMessage(`[]`)))
	agent.out(messages.ToolCall("s1", "c0", "add", nil))
	agent.out(messages.RawToolResult("s1", "c0", "add", []byte(`2`)))
	release := stall.stallNext()
	for i := 1; i <= 10; i++ { // 10 more spans to end, queued behind the stuck one
		id := fmt.Sprint("c", i)
		agent.out(messages.ToolCall("s1", id, "add", nil))
		agent.out(messages.RawToolResult("s1", id, "add", []byte(`2`)))
	}

	ctx, cancel := context.WithCancel(context.Background())
	shut := make(chan error, 1)
	go func() { shut <- tel.Shutdown(ctx) }()
	cancel()
	if err := <-shut; !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown with a stuck processor: %v, want context.Canceled", err)
	}

	close(release) // the stuck OnEnd returns; the processor still stalls
	select {
	case next := <-stall.stalled:
		close(next)
		t.Fatal("a span was handed to the processor after Shutdown gave up")
	case <-tel.rec.done:
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestShutdown_EndsOpenSpansIncomplete: a host that shuts its telemetry
// down before its agents stop (or whose runs never end) does not lose
// the spans still open: Shutdown ends them, marked
// polyweave.telemetry.incomplete, as spans whose ends were dropped are,
// so that the processors get them (a span never ended is never
// exported). The runs' later events are dropped: nothing is ended twice.
func TestShutdown_EndsOpenSpansIncomplete(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tel := boundsTelemetry(t, Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))})
	c := nullContext{self: actors.RefOf(actor.NewPID("test", "agent"))}
	agent := &agentObserver{t: tel, name: "a"}
	agent.in(c, messages.RawParam("s1", "messages", json.RawMessage(`[]`)))
	agent.out(messages.ToolCall("s1", "c1", "add", nil))
	model := &modelObserver{t: tel, provider: "p"}
	model.in(c, messages.RawParam("s2", "model", json.RawMessage(`"m"`)))
	model.in(c, messages.End("s2"))
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	agent.out(messages.RawToolResult("s1", "c1", "add", []byte(`2`)))
	agent.out(messages.End("s1"))
	agent.failed(c, actors.ErrStopped)
	if err := tel.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range exp.GetSpans() {
		got[s.Name] = spanAttr(s, string(incompleteKey))
	}
	want := map[string]string{"invoke_agent a": "true", "execute_tool add": "true", "chat m": "true"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("spans after Shutdown (name: incomplete): %v, want %v", got, want)
	}
}

// TestShutdown_GivesUpWithinATap: Shutdown gives up (its context ends)
// while a processor blocks in the end of the first of many spans one
// agent has open: once that end returns, the recorder hands the agent's
// other spans to the processor no more (the host may be shutting its
// provider down), it returns at once.
func TestShutdown_GivesUpWithinATap(t *testing.T) {
	tel, stall := stalledTelemetry(t, Options{}, nil, true)
	c := nullContext{self: actors.RefOf(actor.NewPID("test", "agent"))}
	agent := &agentObserver{t: tel, name: "a"}
	for i := range 10 {
		agent.in(c, messages.RawParam(fmt.Sprint("s", i), "messages", json.RawMessage(`[]`)))
	}
	ctx, cancel := context.WithCancel(context.Background())
	shut := make(chan error, 1)
	go func() { shut <- tel.Shutdown(ctx) }()
	release := stall.stallNext() // Shutdown ends the first open run
	cancel()
	if err := <-shut; !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown with a stuck processor: %v, want context.Canceled", err)
	}
	close(release)
	select {
	case next := <-stall.stalled:
		close(next)
		t.Fatal("a span was handed to the processor after Shutdown gave up")
	case <-tel.rec.done:
	}
}
