package agent_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// TestAgent_NilAndZeroFailWithErrNoAgent: the methods of a nil *Agent
// and of a zero Agent return ErrNoAgent (or nothing, for those without
// an error), they do not panic.
func TestAgent_NilAndZeroFailWithErrNoAgent(t *testing.T) {
	for name, a := range map[string]*agent.Agent{"nil": nil, "zero": {}} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			if _, err := a.Run(ctx, "s", ask); !errors.Is(err, agent.ErrNoAgent) {
				t.Errorf("Run: %v", err)
			}
			if _, err := restarts(a.Stream(ctx, "s", ask)); !errors.Is(err, agent.ErrNoAgent) {
				t.Errorf("Stream: %v", err)
			}
			if _, err := a.Resume(ctx, "s", ask, agent.Approve("c")); !errors.Is(err, agent.ErrNoAgent) {
				t.Errorf("Resume: %v", err)
			}
			if err := a.Discard(ctx, "s"); !errors.Is(err, agent.ErrNoAgent) {
				t.Errorf("Discard: %v", err)
			}
			if err := a.Close(ctx); !errors.Is(err, agent.ErrNoAgent) {
				t.Errorf("Close: %v", err)
			}
			if _, err := agent.AsTool(a, nil); !errors.Is(err, agent.ErrNoAgent) {
				t.Errorf("AsTool: %v", err)
			}
			if w, n := a.Waiting(), a.Name(); len(w) != 0 || n != "" {
				t.Errorf("Waiting %v, Name %q", w, n)
			}
			if f := a.ToolFlags(); f.Capabilities != nil || f.Idempotent || f.DiesWithProcess {
				t.Errorf("ToolFlags %+v, want none: an agent that is none may not be told read-only", f)
			}
			_ = a.SessionKey("s")
		})
	}
}

// TestNew_NilToolSaysWhich: a nil tool in Options.Tools is refused at
// New with an error naming its place.
func TestNew_NilToolSaysWhich(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	_, err := agent.New(rt, model(t, scripted.Turn{Text: "x"}), &agent.Options{Tools: []*tools.Tool{echo(nil), nil}})
	if err == nil || !strings.Contains(err.Error(), "tool 2 of 2 is nil") {
		t.Fatalf("New with a nil tool: %v", err)
	}
}
