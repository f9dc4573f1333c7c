package mcp_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// An agent given as a tool (agent.AsTool) is served like any tool: an MCP
// client's tools/call runs a conversation of the agent, which calls a
// tool of its own, and gets its answer as structured content; arguments
// the tool's schema refuses are an isError result and start nothing. Its
// annotations say what its own tool may do: an irreversible writer makes
// the delegation destructive.
func TestServer_AgentAsTool(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	var echoed atomic.Int64
	echo := tools.MustNew(tools.Definition{Name: "echo", Description: "Echoes its arguments",
		Capabilities: []string{"write"}, Irreversible: true,
		Handler: func(_ context.Context, args json.RawMessage) (any, error) {
			echoed.Add(1)
			return args, nil
		}})
	model := scripted.MustNew(scripted.Script{Turns: []scripted.Turn{
		{Text: "Echoing.", ToolCalls: []scripted.ToolCall{{ID: "w1", Name: "echo", Arguments: `{"text":"hi"}`}}},
		{Text: "I echoed hi."},
	}}, nil)
	writer, err := agent.New(rt, model.Spec("writer-model"), &agent.Options{Name: "writer", Tools: []*tools.Tool{echo}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := writer.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	tool, err := agent.AsTool(writer, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs := serveOn(t, rt, []*tools.Tool{tool}, nil, nil) // closed before the agent and the runtime

	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tools) != 1 || list.Tools[0].Name != "writer" || !strings.Contains(list.Tools[0].Description, "writer agent") {
		t.Fatalf("tools/list: %+v", list.Tools)
	}
	if a := list.Tools[0].Annotations; a == nil || a.ReadOnlyHint || a.DestructiveHint == nil || !*a.DestructiveHint {
		t.Errorf("an agent with an irreversible writer was not described as destructive: %+v", a)
	}

	res := callTool(t, cs, "writer", map[string]any{"task": "echo hi"})
	if res.IsError {
		t.Fatalf("delegation failed: %s", text(res))
	}
	var got struct {
		Success   bool   `json:"success"`
		Answer    string `json:"answer"`
		ToolCalls int    `json:"tool_calls"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &got); err != nil || !got.Success || got.Answer != "I echoed hi." || got.ToolCalls != 1 {
		t.Fatalf("structured content %s (%v)", b, err)
	}
	if echoed.Load() != 1 {
		t.Fatalf("the agent's own tool ran %d times", echoed.Load())
	}

	res = callTool(t, cs, "writer", map[string]any{"job": "no task"})
	if !res.IsError || !strings.Contains(text(res), "task") {
		t.Fatalf("arguments without a task: isError %v, %s", res.IsError, text(res))
	}
	if echoed.Load() != 1 {
		t.Fatal("refused arguments started the agent")
	}
}
