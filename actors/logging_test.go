package actors_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
)

// logBuffer is a JSON log sink safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// records returns the records written, decoded.
func (b *logBuffer) records(t *testing.T) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, rec)
	}
	return out
}

// runLogged runs a runtime logging to a JSON handler at level: a stage
// logs through its Context, a duplex panics and is restarted, and the
// runtime is closed. It returns the records.
func runLogged(t *testing.T, level slog.Level, protoactorInfo bool) []map[string]any {
	t.Helper()
	var buf logBuffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: level}))
	rt := newRuntime(t, &actors.RuntimeOptions{Logger: logger, ProtoactorInfo: protoactorInfo})
	spec := actors.Duplex("chatty", func(f *messages.Frame, emit func(*messages.Frame)) {
		if f.GetText() == "crash" {
			panic("chatty: asked to crash")
		}
		emit(f)
	})
	newLogic := spec.New
	spec.New = func() actors.Logic {
		inner := newLogic()
		return actors.LogicFunc(func(c actors.Context, msg any) {
			if f, ok := msg.(*messages.Frame); ok && f.GetType() == messages.FrameType_TEXT {
				c.Logger().Warn("stage saw text", "text", f.GetText())
			}
			inner.Receive(c, msg)
		})
	}
	conn, err := rt.Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if err := conn.SendAll(messages.Text("s1", "hello"), messages.Text("s1", "crash")); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.RecvStream(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(ctx); err != nil { // the decision is logged by then
		t.Fatal(err)
	}
	return buf.records(t)
}

// TestLogger_OneLoggerForEverything: with an INFO logger, the stage's own
// record (with its actor id) and the supervision decision arrive, and
// none of protoactor's INFO chatter does.
func TestLogger_OneLoggerForEverything(t *testing.T) {
	recs := runLogged(t, slog.LevelInfo, false)
	var stage, decision bool
	for _, r := range recs {
		switch {
		case r["component"] == "protoactor":
			t.Errorf("protoactor record at INFO or above: %v", r)
		case r["msg"] == "stage saw text":
			stage = r["level"] == "WARN" && strings.Contains(r["actor"].(string), "chatty")
		case r["msg"] == "supervision":
			decision = r["level"] == "WARN" && r["directive"] == "restart" && strings.Contains(r["child"].(string), "chatty") &&
				strings.Contains(r["reason"].(string), "asked to crash")
		}
	}
	if !stage || !decision {
		t.Errorf("stage record %v, supervision record %v in %v", stage, decision, recs)
	}
}

// TestLogger_ProtoactorInfoIsDebug: protoactor's INFO records are there
// at DEBUG, and at INFO when ProtoactorInfo asks for them.
func TestLogger_ProtoactorInfoIsDebug(t *testing.T) {
	for _, tc := range []struct {
		keep bool
		want string
	}{{false, "DEBUG"}, {true, "INFO"}} {
		levels := map[string]string{}
		for _, r := range runLogged(t, slog.LevelDebug, tc.keep) {
			if r["component"] == "protoactor" {
				levels[r["msg"].(string)] = r["level"].(string)
			}
		}
		for _, msg := range []string{"actor system started", "[ACTOR] Recovering"} {
			if levels[msg] != tc.want {
				t.Errorf("ProtoactorInfo %v: %q at %q, want %s (protoactor records %v)", tc.keep, msg, levels[msg], tc.want, levels)
			}
		}
	}
}
