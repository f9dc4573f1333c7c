package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/components/tool/utils"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"
)

// userPrompt is the one user message every run starts from.
const userPrompt = "run the three tools"

// finalText is the answer the scripted model gives once all tools have run.
const finalText = "done"

// scriptedTurn is one tool call the scripted model makes.
type scriptedTurn struct {
	tool string
	n    int
}

// script lists the tool calls in order; the model's turn after them is the
// text finalText.
var script = []scriptedTurn{
	{tool: "noop_a", n: 1},
	{tool: "noop_b", n: 2},
	{tool: "noop_c", n: 3},
}

// modelCallsPerRun is how many times one run must call the model.
var modelCallsPerRun = len(script) + 1

// scriptedModel is a model.ToolCallingChatModel that picks its turn from the
// number of tool messages in its input: the i-th turn calls script[i], the
// turn after the last calls no tool and answers finalText.
//
// Its only state is a call counter, which is not synchronised: a run calls
// the model sequentially, and runs do not overlap. The zero value is ready to
// use.
type scriptedModel struct {
	calls int
	// streamed makes the turns those of the streaming conversation: the
	// calls carry a note, Stream cuts arguments and text into chunks.
	streamed bool
}

var _ model.ToolCallingChatModel = (*scriptedModel)(nil)

// Generate returns the scripted turn for input.
func (m *scriptedModel) Generate(_ context.Context, input []*schema.Message, _ ...model.Option) (*schema.Message, error) {
	m.calls++
	seen := 0
	for _, msg := range input {
		if msg.Role == schema.Tool {
			seen++
		}
	}
	if seen >= len(script) {
		return schema.AssistantMessage(finalText, nil), nil
	}
	turn := script[seen]
	args := fmt.Sprintf(`{"n":%d}`, turn.n)
	if m.streamed {
		args = streamedArguments(turn.n)
	}
	return schema.AssistantMessage("", []schema.ToolCall{{
		ID:   fmt.Sprintf("call_%d", seen+1),
		Type: "function",
		Function: schema.FunctionCall{
			Name:      turn.tool,
			Arguments: args,
		},
	}}), nil
}

// Stream returns the scripted turn for input as a stream: a call's
// arguments in streamArgChunk-byte chunks (the first chunk with the id and
// name, the others with the index only, as providers stream them), the
// text in streamTextDelta-byte deltas. Without streamed, the turn is one
// message.
func (m *scriptedModel) Stream(ctx context.Context, input []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	msg, err := m.Generate(ctx, input, opts...)
	if err != nil {
		return nil, err
	}
	if !m.streamed {
		return schema.StreamReaderFromArray([]*schema.Message{msg}), nil
	}
	var parts []*schema.Message
	for _, text := range cut(msg.Content, streamTextDelta) {
		parts = append(parts, schema.AssistantMessage(text, nil))
	}
	for i, tc := range msg.ToolCalls {
		for j, args := range cut(tc.Function.Arguments, streamArgChunk) {
			index := i
			chunk := schema.ToolCall{Index: &index, Function: schema.FunctionCall{Arguments: args}}
			if j == 0 {
				chunk.ID, chunk.Type, chunk.Function.Name = tc.ID, tc.Type, tc.Function.Name
			}
			parts = append(parts, schema.AssistantMessage("", []schema.ToolCall{chunk}))
		}
	}
	return schema.StreamReaderFromArray(parts), nil
}

// The streaming conversation (bench/peers/README.md): arguments with a
// note, in 8-byte chunks, the answer in 1-byte deltas.
const (
	streamArgChunk  = 8
	streamTextDelta = 1
)

// streamedArguments are the arguments of call n of the streaming
// conversation.
func streamedArguments(n int) string {
	return fmt.Sprintf(`{"n":%d,"note":"%s"}`, n, streamedNote(n))
}

func streamedNote(n int) string { return fmt.Sprintf("call %d of 3, streamed in 8-byte chunks", n) }

// cut cuts s into pieces of n bytes (the last one shorter); none for "".
func cut(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

// WithTools returns m itself: the script does not depend on the tools bound.
func (m *scriptedModel) WithTools([]*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	return m, nil
}

// noopInput is the arguments of every no-op tool.
type noopInput struct {
	N int `json:"n" jsonschema:"description=the step number"`
	// Note is sent by the streaming conversation only.
	Note string `json:"note,omitempty" jsonschema:"description=what the call is"`
}

// noopOutput is the result of every no-op tool.
type noopOutput struct {
	OK bool `json:"ok"`
}

// conversation is one ReAct agent wired to the scripted model and the three
// no-op tools, with the counters that verify a run. It is not safe for
// concurrent runs.
type conversation struct {
	agent *react.Agent
	model *scriptedModel
	// calls counts tool executions per tool name in the current run.
	calls map[string]int
	// badArgs records the first tool argument that broke the script.
	badArgs error
	// streamed runs the streaming conversation with Agent.Stream.
	streamed bool
}

// newConversation builds the agent once; runs reuse it. streamed plays
// the streaming conversation (see run).
func newConversation(ctx context.Context, streamed bool) (*conversation, error) {
	c := &conversation{model: &scriptedModel{streamed: streamed}, calls: make(map[string]int, len(script)), streamed: streamed}
	tools := make([]tool.BaseTool, 0, len(script))
	for _, turn := range script {
		t, err := utils.InferTool(turn.tool, "no-op tool "+turn.tool, c.noop(turn))
		if err != nil {
			return nil, fmt.Errorf("build tool %s: %w", turn.tool, err)
		}
		tools = append(tools, t)
	}
	agent, err := react.NewAgent(ctx, &react.AgentConfig{
		ToolCallingModel: c.model,
		ToolsConfig:      compose.ToolsNodeConfig{Tools: tools},
		// Above the 7 graph steps a run needs (4 model, 3 tools): the text
		// turn, not the limit, ends the loop.
		MaxStep: 20,
	})
	if err != nil {
		return nil, fmt.Errorf("build react agent: %w", err)
	}
	c.agent = agent
	return c, nil
}

// noop returns the tool function for turn: it counts the call, checks the
// argument and returns {"ok":true}.
func (c *conversation) noop(turn scriptedTurn) utils.InvokeFunc[noopInput, noopOutput] {
	return func(_ context.Context, in noopInput) (noopOutput, error) {
		c.calls[turn.tool]++
		if in.N != turn.n && c.badArgs == nil {
			c.badArgs = fmt.Errorf("tool %s got n=%d, want %d", turn.tool, in.N, turn.n)
		}
		if c.streamed && in.Note != streamedNote(turn.n) && c.badArgs == nil {
			c.badArgs = fmt.Errorf("tool %s got note %q, want %q", turn.tool, in.Note, streamedNote(turn.n))
		}
		return noopOutput{OK: true}, nil
	}
}

// errOffScript reports a run that did not follow the script.
var errOffScript = errors.New("run strayed from the script")

// run plays the conversation once and verifies it: each tool ran exactly
// once with its scripted argument, the model was called modelCallsPerRun
// times and the final answer is finalText.
func (c *conversation) run(ctx context.Context) error {
	clear(c.calls)
	c.badArgs = nil
	c.model.calls = 0

	out, err := c.answer(ctx)
	if err != nil {
		return err
	}
	if out.Content != finalText {
		return fmt.Errorf("%w: final answer %q, want %q", errOffScript, out.Content, finalText)
	}
	if c.badArgs != nil {
		return fmt.Errorf("%w: %w", errOffScript, c.badArgs)
	}
	for _, turn := range script {
		if got := c.calls[turn.tool]; got != 1 {
			return fmt.Errorf("%w: tool %s ran %d times, want 1", errOffScript, turn.tool, got)
		}
	}
	if c.model.calls != modelCallsPerRun {
		return fmt.Errorf("%w: model called %d times, want %d", errOffScript, c.model.calls, modelCallsPerRun)
	}
	return nil
}

// answer runs the agent: Generate, or with streamed Stream, reading the
// answer's deltas to the end and joining them.
func (c *conversation) answer(ctx context.Context) (*schema.Message, error) {
	input := []*schema.Message{schema.UserMessage(userPrompt)}
	if !c.streamed {
		out, err := c.agent.Generate(ctx, input)
		if err != nil {
			return nil, fmt.Errorf("agent generate: %w", err)
		}
		return out, nil
	}
	sr, err := c.agent.Stream(ctx, input)
	if err != nil {
		return nil, fmt.Errorf("agent stream: %w", err)
	}
	defer sr.Close()
	var parts []*schema.Message
	for {
		part, err := sr.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("agent stream: %w", err)
		}
		parts = append(parts, part)
	}
	if len(parts) != len(finalText)/streamTextDelta {
		return nil, fmt.Errorf("%w: answer in %d deltas, want %d", errOffScript, len(parts), len(finalText)/streamTextDelta)
	}
	return schema.ConcatMessages(parts)
}
