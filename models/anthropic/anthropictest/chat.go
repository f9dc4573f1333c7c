package anthropictest

import (
	"encoding/json"
	"fmt"
)

// Message is a message of a Messages API request body as a server reads
// it: its role and content blocks.
type Message struct {
	Role    string  `json:"role"`
	Content []Block `json:"content"`
}

// Block is a content block of a [Message]: text, tool_use (ID, Name,
// Input) or tool_result (ToolUseID, Content as a string, IsError).
type Block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   string          `json:"content"`
	IsError   bool            `json:"is_error"`
}

// ChatView reads a Messages API request body back into the fields of the
// request as the adapter received them (the OpenAI chat vocabulary of
// package models): system blocks and messages become one "messages"
// array (system messages first, tool_result blocks as "tool" messages,
// tool_use blocks as tool_calls), tools become function tools and
// tool_choice its chat form. Other fields are kept as they are, except
// "stream" and "system", which are left out. It lets a conformance test
// check that what reached the server is what was sent.
func ChatView(body map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	out := make(map[string]json.RawMessage, len(body))
	for k, v := range body {
		switch k {
		case "stream", "system", "messages", "tools", "tool_choice":
		default:
			out[k] = v
		}
	}
	var msgs []map[string]any
	if raw, ok := body["system"]; ok {
		var blocks []struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(raw, &blocks); err != nil {
			return nil, fmt.Errorf("system: %w", err)
		}
		for _, b := range blocks {
			msgs = append(msgs, map[string]any{"role": "system", "content": b.Text})
		}
	}
	var turns []Message
	if err := json.Unmarshal(body["messages"], &turns); err != nil {
		return nil, fmt.Errorf("messages: %w", err)
	}
	for _, t := range turns {
		var text *string
		var calls []any
		addText := func(s string) {
			if text == nil {
				text = new(string)
			}
			*text += s
		}
		for _, b := range t.Content {
			switch b.Type {
			case "text":
				addText(b.Text)
			case "tool_use":
				calls = append(calls, map[string]any{"id": b.ID, "type": "function",
					"function": map[string]any{"name": b.Name, "arguments": string(b.Input)}})
			case "tool_result":
				msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": b.ToolUseID, "content": b.Content})
			}
		}
		if text == nil && len(calls) == 0 {
			continue
		}
		m := map[string]any{"role": t.Role, "content": text}
		if len(calls) > 0 {
			m["tool_calls"] = calls
		}
		msgs = append(msgs, m)
	}
	var err error
	if out["messages"], err = json.Marshal(msgs); err != nil {
		return nil, err
	}
	if raw, ok := body["tools"]; ok {
		var tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		}
		if err := json.Unmarshal(raw, &tools); err != nil {
			return nil, fmt.Errorf("tools: %w", err)
		}
		var fns []any
		for _, t := range tools {
			fns = append(fns, map[string]any{"type": "function", "function": map[string]any{
				"name": t.Name, "description": t.Description, "parameters": t.InputSchema}})
		}
		out["tools"], _ = json.Marshal(fns)
	}
	if raw, ok := body["tool_choice"]; ok {
		var tc struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		if err := json.Unmarshal(raw, &tc); err != nil {
			return nil, fmt.Errorf("tool_choice: %w", err)
		}
		switch tc.Type {
		case "any":
			out["tool_choice"] = json.RawMessage(`"required"`)
		case "tool":
			out["tool_choice"], _ = json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}})
		default:
			out["tool_choice"], _ = json.Marshal(tc.Type)
		}
	}
	return out, nil
}
