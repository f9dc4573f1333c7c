package tools_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// logCapture is a slog.Handler that keeps every record it is given, or,
// when it breaks, panics on a "tool call panicked" record, as a host's
// faulty handler may.
type logCapture struct {
	breaks  bool
	mu      sync.Mutex
	records []slog.Record
	// panicked gets a signal for each "tool call panicked" record kept:
	// a tool's actor answers the call before it logs the panic, so the
	// record may come after the answer.
	panicked chan struct{}
}

func (h *logCapture) Enabled(context.Context, slog.Level) bool { return true }

func (h *logCapture) Handle(_ context.Context, r slog.Record) error {
	if h.breaks && r.Message == "tool call panicked" {
		panic("log handler broke")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	if r.Message == "tool call panicked" {
		h.panicked <- struct{}{}
	}
	return nil
}

func (h *logCapture) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logCapture) WithGroup(string) slog.Handler      { return h }

// panicLog is one "tool call panicked" record: its level and attributes.
type panicLog struct {
	level slog.Level
	attrs map[string]string
}

// panics returns the "tool call panicked" records kept so far.
func (h *logCapture) panics() []panicLog {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []panicLog
	for _, r := range h.records {
		if r.Message != "tool call panicked" {
			continue
		}
		p := panicLog{level: r.Level, attrs: map[string]string{}}
		r.Attrs(func(a slog.Attr) bool {
			p.attrs[a.Key] = a.Value.String()
			return true
		})
		out = append(out, p)
	}
	return out
}

// logCases are the loggers a panic's log is tried on: one that keeps the
// records, and one whose handler panics on the panic's record, which must
// cost the call neither its result nor the answering actor its life.
var logCases = []struct {
	name   string
	breaks bool
}{{"logged", false}, {"log handler panics", true}}

// loggedRuntime starts a runtime whose logs go to the returned capture,
// which panics on a panic's record if breaks.
func loggedRuntime(t *testing.T, breaks bool) (*actors.Runtime, *logCapture) {
	logs := &logCapture{breaks: breaks, panicked: make(chan struct{}, 16)}
	return actorstest.NewRuntime(t, &actors.RuntimeOptions{Logger: slog.New(logs)}), logs
}

// checkPanicLog checks that logs hold one Error record of the panic of
// tool's call c1 during what, whose stack shows where it was raised (in);
// a capture that breaks holds none to check.
func checkPanicLog(t *testing.T, logs *logCapture, tool, during, in string) {
	t.Helper()
	if logs.breaks {
		return
	}
	select {
	case <-logs.panicked:
	case <-testCtx(t).Done():
		t.Fatalf("no record of the panic of %s's call c1", tool)
	}
	got := logs.panics()
	if len(got) != 1 {
		t.Fatalf("%d records of the panic, want 1: %+v", len(got), got)
	}
	p := got[0]
	if p.level != slog.LevelError || p.attrs["tool"] != tool || p.attrs["tool_call_id"] != "c1" ||
		p.attrs["during"] != during || p.attrs["panic"] == "" {
		t.Errorf("logged %v %v, want an error of %s's call c1 during %s", p.level, p.attrs, tool, during)
	}
	if !strings.Contains(p.attrs["stack"], in) {
		t.Errorf("the logged stack does not show %s:\n%s", in, p.attrs["stack"])
	}
}

// TestCallRunner_LogsPanicStack: a panic that becomes a call's panicked
// result, rather than failing an actor, is logged once at Error level
// with the stack it was raised on, whether the arguments' validation
// panicked on the tool's actor or inline, or a Sync handler did inline.
// A log handler that panics on that record loses the record, not the
// call's result.
func TestCallRunner_LogsPanicStack(t *testing.T) {
	for _, lc := range logCases {
		t.Run(lc.name, func(t *testing.T) { testCallRunnerLogsPanicStack(t, lc.breaks) })
	}
}

func testCallRunnerLogsPanicStack(t *testing.T, breaks bool) {
	for _, tc := range []struct {
		name         string
		sync, broken bool
		during, in   string
	}{
		{"validation on the tool's actor", false, true, "validation", "(*validator).validate"},
		{"validation inline", true, true, "validation", "(*validator).validate"},
		{"handler inline", true, false, "handler", "testCallRunnerLogsPanicStack"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt, logs := loggedRuntime(t, breaks)
			tool := tools.MustNew(tools.Definition{Name: "v", Sync: tc.sync, Handler: func(context.Context, json.RawMessage) (any, error) {
				panic("handler broke")
			}})
			if tc.broken {
				tools.BreakValidation(tool)
			}
			spec, err := tools.NewCallRunner(&tools.RouterOptions{Tools: []*tools.Tool{tool}})
			if err != nil {
				t.Fatal(err)
			}
			conn := start(t, rt, spec)
			if err := conn.Send(messages.ToolCall("s", "c1", "v", raw(`{"a":1}`))); err != nil {
				t.Fatal(err)
			}
			got, err := conn.RecvStream(testCtx(t), "s")
			if err != nil {
				t.Fatalf("stream s: %v (so far %q)", err, lines(got))
			}
			if len(got) != 2 || tools.KindOf(got[0]) != tools.FailurePanic {
				t.Fatalf("stream s: %q, want c1's panicked result and END", lines(got))
			}
			checkPanicLog(t, logs, "v", tc.during, tc.in)
		})
	}
}
