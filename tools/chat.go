package tools

import (
	"encoding/json"
	"fmt"

	"github.com/polyweave/polyweave-go/messages"
)

// The OpenAI chat message shapes the loop writes (see the package doc).
type (
	chatMessage struct {
		Role       string         `json:"role"`
		Content    *string        `json:"content"`
		ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
		ToolCallID string         `json:"tool_call_id,omitempty"`
	}
	chatToolCall struct {
		ID       string       `json:"id"`
		Type     string       `json:"type"`
		Function chatFunction `json:"function"`
	}
	chatFunction struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
)

func decodeMessages(payload []byte) ([]json.RawMessage, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(payload, &list); err != nil {
		return nil, fmt.Errorf("decode messages: %w", err)
	}
	return list, nil
}

// encodeMessages joins messages into a JSON array. Every element is valid
// JSON already (decoded from a messages PARAM or encoded by this package),
// so they are copied as they are: re-encoding them with json.Marshal would
// re-validate the whole, ever longer, conversation at every follow-up.
func encodeMessages(list []json.RawMessage) json.RawMessage {
	n := 2
	for _, m := range list {
		n += len(m) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, m := range list {
		if i > 0 {
			b = append(b, ',')
		}
		if len(m) == 0 {
			m = json.RawMessage("null")
		}
		b = append(b, m...)
	}
	return append(b, ']')
}

func rawMessage(m chatMessage) json.RawMessage {
	b, _ := json.Marshal(m) // strings only
	return b
}

func systemMessage(prompt string) json.RawMessage {
	return rawMessage(chatMessage{Role: "system", Content: &prompt})
}

// withSystem returns list with a system message in front.
func withSystem(list []json.RawMessage, prompt string) []json.RawMessage {
	return append([]json.RawMessage{systemMessage(prompt)}, list...)
}

// assistantMessage is the assistant turn that made calls, as accumulated.
func assistantMessage(text string, calls []*messages.Frame) json.RawMessage {
	m := chatMessage{Role: "assistant"}
	if text != "" {
		m.Content = &text
	}
	for _, c := range calls {
		m.ToolCalls = append(m.ToolCalls, chatToolCall{ID: c.GetToolCallId(), Type: "function",
			Function: chatFunction{Name: c.GetName(), Arguments: string(c.GetPayload())}})
	}
	return rawMessage(m)
}

// toolMessage answers one call: content is the result JSON as a string.
func toolMessage(result *messages.Frame) json.RawMessage {
	content := string(result.GetPayload())
	return rawMessage(chatMessage{Role: "tool", Content: &content, ToolCallID: result.GetToolCallId()})
}
