package anthropic_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/internal/syncbuf"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/anthropic"
	"github.com/polyweave/polyweave-go/models/modeltest"
)

// TestAdapter_LogsThroughTheRuntime: without a Logger of its own, the
// adapter logs through the runtime's, with its actor id.
func TestAdapter_LogsThroughTheRuntime(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		modeltest.StreamBody(sse(messageStart(3, 0, 0), textStart(0), textDelta(0, "Hi."), blockStop(0), messageDelta("end_turn", 2), messageStop))(0, w, r, nil)
	}))
	defer srv.Close()
	m, err := anthropic.New(&anthropic.Options{BaseURL: srv.URL, HTTPClient: srv.Client(), Model: "claude-sonnet-4-5", MaxRetries: anthropic.NoRetries})
	if err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	rt, err := actors.NewRuntime(&actors.RuntimeOptions{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	defer rt.Close(ctx)
	conn, err := rt.Start(m.Spec("model"))
	if err != nil {
		t.Fatal(err)
	}
	req := &models.Request{StreamID: "s1", Params: []models.Param{param(models.ParamMessages, `[{"role":"user","content":"hi"}]`)}}
	if err := conn.SendAll(req.Frames()...); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.RecvStream(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "answer streamed") {
			line = l
		}
	}
	if !strings.Contains(line, "level=DEBUG") || !strings.Contains(line, "actor=polyweave/model") || !strings.Contains(line, "stream=s1") {
		t.Fatalf("no debug record of the answer with the actor's id in the runtime's log:\n%s", logs.String())
	}
}
