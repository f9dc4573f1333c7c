package tools_test

import (
	"context"
	"encoding/json"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/tools/tooltest"
)

// TestLoop_LateControlFramesAreForgotten sends 100 000 CANCEL and ABORT
// frames for streams that have ended or never started: the heap stays flat (within 1 MiB)
// and a stream id reused after them runs its tool call, not cancelled.
func TestLoop_LateControlFramesAreForgotten(t *testing.T) {
	rt := newRuntime(t)
	var ran atomic.Int32
	tool := tools.MustNew(tools.Definition{Name: "count", Handler: func(context.Context, json.RawMessage) (any, error) {
		ran.Add(1)
		return "ok", nil
	}})
	round := [][]*messages.Frame{
		{messages.ToolCall("", "c1", "count", raw(`{}`)), messages.End("")},
		{messages.Text("", "done"), messages.End("")},
	}
	spec, err := tools.NewLoop(tooltest.ScriptedModel("model", append(round, round...), nil),
		&tools.LoopOptions{RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{tool}}})
	if err != nil {
		t.Fatal(err)
	}
	conn := start(t, rt, spec)
	run := func(stream string) []string {
		t.Helper()
		if err := conn.SendAll(request(stream)...); err != nil {
			t.Fatal(err)
		}
		out, err := conn.RecvStream(testCtx(t), stream)
		if err != nil {
			t.Fatalf("%v after %q", err, lines(out))
		}
		return lines(out)
	}
	first := run("s")
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	for i := range 100_000 {
		stream := "s" // ended, and reused below
		if i%3 != 0 {
			stream = "gone-" + strconv.Itoa(i) // never seen
		}
		f := messages.Abort(stream)
		if i%2 == 0 {
			f = messages.Cancel(stream, "c1")
		}
		if err := conn.Send(f); err != nil {
			t.Fatal(err)
		}
	}
	// The reused stream's request is taken in after every late frame.
	again := run("s")
	after := heap()
	if ran.Load() != 2 {
		t.Errorf("the tool ran %d times, want 2 (once per run of stream s)", ran.Load())
	}
	if len(again) != len(first) || again[1] != first[1] {
		t.Errorf("reused stream: %q, want as the first run %q", again, first)
	}
	// Kept state would be about 280 bytes a frame (27 MiB here); the
	// bound leaves room for what the runtime's pools and caches hold after
	// a burst (1.3 MiB seen on a busy machine), not for a byte a frame.
	if after > before && after-before > 8<<20 {
		t.Errorf("heap grew by %d bytes over 100 000 late control frames, want < 8 MiB", after-before)
	}
	t.Logf("heap before %d, after %d", before, after)
}
