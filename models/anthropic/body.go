package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/internal/httpadapter"
)

// Errors of requests the adapter cannot send. The ERROR frame of such a
// request carries their text, with detail.
var (
	// ErrNoModel: no "model" PARAM and no Options.Model.
	ErrNoModel = errors.New("no model: send a model PARAM or set Options.Model")
	// ErrNoMessages: no "messages" PARAM.
	ErrNoMessages = errors.New("request has no messages PARAM")
	// ErrBadRequest: a PARAM the adapter cannot translate into a Messages
	// API request (a message of an unknown role, a tool message without
	// the call it answers, a tool_choice of an unknown form...).
	ErrBadRequest = errors.New("cannot translate the request")
)

// PARAMs of the OpenAI vocabulary the Messages API has no field for: they
// are dropped rather than sent (the API rejects unknown fields).
var dropped = map[string]bool{
	"stream": true, "stream_options": true, "n": true, "frequency_penalty": true,
	"presence_penalty": true, "logit_bias": true, "logprobs": true, "top_logprobs": true,
	"seed": true, "response_format": true, "user": true, "parallel_tool_calls": true,
	"reasoning_effort": true, "modalities": true, "store": true,
}

// chat-format shapes read from the "messages" PARAM.
type (
	chatMessage struct {
		Role           string          `json:"role"`
		Content        json.RawMessage `json:"content"`
		ToolCalls      []chatToolCall  `json:"tool_calls"`
		ToolCallID     string          `json:"tool_call_id"`
		ThinkingBlocks json.RawMessage `json:"thinking_blocks"`
	}
	chatToolCall struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	chatPart struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL struct {
			URL string `json:"url"`
		} `json:"image_url"`
	}
	chatTool struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
)

// Messages API shapes written into the body.
type (
	apiMessage struct {
		Role    string            `json:"role"`
		Content []json.RawMessage `json:"content"`
	}
	textBlock struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	toolUseBlock struct {
		Type  string          `json:"type"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}
	toolResultBlock struct {
		Type      string `json:"type"`
		ToolUseID string `json:"tool_use_id"`
		Content   string `json:"content"`
		IsError   bool   `json:"is_error,omitempty"`
	}
	apiTool struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
)

func marshal(v any) json.RawMessage {
	b, _ := json.Marshal(v) // plain structs of strings and raw JSON already checked
	return b
}

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadRequest, fmt.Sprintf(format, args...))
}

// requestBody writes the Messages API request for req (see the package
// doc for the translation).
func requestBody(req *models.Request, defaultModel string, defaultMaxTokens int) ([]byte, error) {
	msgs, ok := req.Param(models.ParamMessages)
	if !ok {
		return nil, ErrNoMessages
	}
	body := map[string]json.RawMessage{}
	last := make(map[string]int, len(req.Params))
	for i, p := range req.Params {
		last[p.Name] = i
	}
	var toolChoice json.RawMessage
	parallel := true
	for i, p := range req.Params {
		if last[p.Name] != i {
			continue
		}
		if err := httpadapter.CheckParam(p); err != nil {
			return nil, err
		}
		switch p.Name {
		case models.ParamMessages:
		case models.ParamTools:
			tools, err := translateTools(p.Value)
			if err != nil {
				return nil, err
			}
			if tools != nil {
				body["tools"] = tools
			}
		case models.ParamToolChoice:
			toolChoice = p.Value
		case "parallel_tool_calls":
			parallel = !bytes.Equal(bytes.TrimSpace(p.Value), []byte("false"))
		case "max_completion_tokens":
			if _, ok := req.Param("max_tokens"); !ok {
				body["max_tokens"] = p.Value
			}
		case "stop":
			body["stop_sequences"] = stopSequences(p.Value)
		default:
			if !dropped[p.Name] {
				body[p.Name] = p.Value
			}
		}
	}
	if _, ok := body[models.ParamModel]; !ok {
		if defaultModel == "" {
			return nil, ErrNoModel
		}
		body[models.ParamModel] = marshal(defaultModel)
	}
	if _, ok := body["max_tokens"]; !ok {
		body["max_tokens"] = marshal(defaultMaxTokens)
	}
	system, messages, err := translateMessages(msgs)
	if err != nil {
		return nil, err
	}
	if len(system) > 0 {
		if given, ok := body["system"]; ok {
			return nil, badRequest("both a system PARAM (%.40s) and system messages", given)
		}
		body["system"] = marshal(system)
	}
	body["messages"] = marshal(messages)
	if _, hasTools := body["tools"]; hasTools {
		tc, err := translateToolChoice(toolChoice, parallel)
		if err != nil {
			return nil, err
		}
		if tc != nil {
			body["tool_choice"] = tc
		}
	}
	body["stream"] = json.RawMessage("true")
	return json.Marshal(body)
}

// stopSequences turns OpenAI's stop (a string or an array) into an array.
func stopSequences(v json.RawMessage) json.RawMessage {
	var one string
	if json.Unmarshal(v, &one) == nil {
		return marshal([]string{one})
	}
	return v
}

// translateTools turns OpenAI function tools into Messages API tools; an
// empty or null list gives nil. Tools of other types (Anthropic's own
// server tools, given in their native form) pass unchanged.
func translateTools(v json.RawMessage) (json.RawMessage, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(v, &raw); err != nil {
		return nil, badRequest("tools: %v", err)
	}
	if len(raw) == 0 {
		return nil, nil
	}
	out := make([]json.RawMessage, 0, len(raw))
	for i, r := range raw {
		var t chatTool
		if err := json.Unmarshal(r, &t); err != nil {
			return nil, badRequest("tool %d: %v", i, err)
		}
		if t.Type != "function" {
			out = append(out, r)
			continue
		}
		if t.Function.Name == "" {
			return nil, badRequest("tool %d has no function name", i)
		}
		schema := t.Function.Parameters
		if len(schema) == 0 || bytes.Equal(bytes.TrimSpace(schema), []byte("null")) {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		out = append(out, marshal(apiTool{Name: t.Function.Name, Description: t.Function.Description, InputSchema: schema}))
	}
	return marshal(out), nil
}

// translateToolChoice maps "auto", "none", "required" and
// {"type":"function","function":{"name"}} to the Messages API's auto, none,
// any and tool; parallel false sets disable_parallel_tool_use. A choice
// already in the Messages API's form passes unchanged.
func translateToolChoice(v json.RawMessage, parallel bool) (json.RawMessage, error) {
	choice := map[string]any{"type": "auto"}
	if len(v) > 0 {
		var s string
		var obj struct {
			Type     string `json:"type"`
			Name     string `json:"name"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		switch {
		case json.Unmarshal(v, &s) == nil:
			switch s {
			case "auto", "none":
				choice["type"] = s
			case "required", "any":
				choice["type"] = "any"
			default:
				return nil, badRequest("tool_choice %q", s)
			}
		case json.Unmarshal(v, &obj) == nil:
			switch obj.Type {
			case "function":
				if obj.Function.Name == "" {
					return nil, badRequest("tool_choice names no function: %s", v)
				}
				choice = map[string]any{"type": "tool", "name": obj.Function.Name}
			case "auto", "any", "none", "tool":
				if err := json.Unmarshal(v, &choice); err != nil {
					return nil, badRequest("tool_choice: %v", err)
				}
			default:
				return nil, badRequest("tool_choice of type %q", obj.Type)
			}
		default:
			return nil, badRequest("tool_choice %s", v)
		}
	} else if parallel {
		return nil, nil // the API's default
	}
	if !parallel && choice["type"] != "none" {
		choice["disable_parallel_tool_use"] = true
	}
	return marshal(choice), nil
}

// translateMessages splits the chat messages into the system blocks and
// the Messages API turns. System (and developer) messages, wherever they
// are, become system text blocks in order. Assistant messages become
// thinking blocks (from thinking_blocks), a text block and one tool_use
// block per call; tool messages become tool_result blocks at the start of
// the next user turn. Consecutive messages of one role are joined into one
// turn.
func translateMessages(v json.RawMessage) ([]textBlock, []apiMessage, error) {
	var list []chatMessage
	if err := json.Unmarshal(v, &list); err != nil {
		return nil, nil, badRequest("messages: %v", err)
	}
	var system []textBlock
	var out []apiMessage
	calls := map[string]bool{} // tool_use ids of the conversation
	add := func(role string, blocks ...json.RawMessage) {
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			return
		}
		out = append(out, apiMessage{Role: role, Content: blocks})
	}
	for i, m := range list {
		switch m.Role {
		case "system", "developer":
			text, err := plainText(m.Content)
			if err != nil {
				return nil, nil, badRequest("message %d (%s): %v", i, m.Role, err)
			}
			if text != "" {
				system = append(system, textBlock{Type: "text", Text: text})
			}
		case "user":
			blocks, err := contentBlocks(m.Content)
			if err != nil {
				return nil, nil, badRequest("message %d (user): %v", i, err)
			}
			if len(blocks) > 0 {
				add("user", blocks...)
			}
		case "assistant":
			var blocks []json.RawMessage
			if len(m.ThinkingBlocks) > 0 && !bytes.Equal(m.ThinkingBlocks, []byte("null")) {
				var thinking []json.RawMessage
				if err := json.Unmarshal(m.ThinkingBlocks, &thinking); err != nil {
					return nil, nil, badRequest("message %d (assistant): thinking_blocks: %v", i, err)
				}
				blocks = append(blocks, thinking...)
			}
			text, err := contentBlocks(m.Content)
			if err != nil {
				return nil, nil, badRequest("message %d (assistant): %v", i, err)
			}
			blocks = append(blocks, text...)
			for _, c := range m.ToolCalls {
				if c.ID == "" || c.Function.Name == "" {
					return nil, nil, badRequest("message %d (assistant): a tool call without id or name", i)
				}
				calls[c.ID] = true
				blocks = append(blocks, marshal(toolUseBlock{Type: "tool_use", ID: c.ID, Name: c.Function.Name, Input: toolInput(c.Function.Arguments)}))
			}
			if len(blocks) > 0 {
				add("assistant", blocks...)
			}
		case "tool":
			if !calls[m.ToolCallID] {
				return nil, nil, badRequest("message %d (tool) answers %q, which no assistant message called", i, m.ToolCallID)
			}
			content, err := plainText(m.Content)
			if err != nil {
				return nil, nil, badRequest("message %d (tool): %v", i, err)
			}
			add("user", marshal(toolResultBlock{Type: "tool_result", ToolUseID: m.ToolCallID, Content: content, IsError: isErrorResult(content)}))
		default:
			return nil, nil, badRequest("message %d has role %q", i, m.Role)
		}
	}
	return system, out, nil
}

// toolInput is a call's arguments as the tool_use input: the arguments
// themselves when they are a JSON object, {} when empty or not an object
// (a call cut off by the length limit is answered with an error result
// and recorded with {}).
func toolInput(args string) json.RawMessage {
	b := bytes.TrimSpace([]byte(args))
	if len(b) > 0 && b[0] == '{' && json.Valid(b) {
		return b
	}
	return json.RawMessage("{}")
}

// isErrorResult reports whether a tool message's content is a failed
// result as tool routers write them: {"success":false,...}.
func isErrorResult(content string) bool {
	if !strings.HasPrefix(strings.TrimSpace(content), "{") {
		return false
	}
	var r struct {
		Success *bool `json:"success"`
	}
	return json.Unmarshal([]byte(content), &r) == nil && r.Success != nil && !*r.Success
}

// plainText reads a content that is a string, null, or an array of text
// parts.
func plainText(v json.RawMessage) (string, error) {
	if len(v) == 0 || bytes.Equal(v, []byte("null")) {
		return "", nil
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s, nil
	}
	var parts []chatPart
	if err := json.Unmarshal(v, &parts); err != nil {
		return "", fmt.Errorf("content is neither a string nor an array of parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("content part of type %q where only text is allowed", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// contentBlocks turns a content (string, null, or an array of parts) into
// Messages API blocks: text parts into text blocks, image_url parts into
// image blocks (a data: URL as base64 source, any other URL as url
// source); parts already in the Messages API's form pass unchanged. Empty
// text is left out (the API rejects empty text blocks).
func contentBlocks(v json.RawMessage) ([]json.RawMessage, error) {
	if len(v) == 0 || bytes.Equal(v, []byte("null")) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		if s == "" {
			return nil, nil
		}
		return []json.RawMessage{marshal(textBlock{Type: "text", Text: s})}, nil
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(v, &raw); err != nil {
		return nil, fmt.Errorf("content is neither a string nor an array of parts")
	}
	var out []json.RawMessage
	for _, r := range raw {
		var p chatPart
		if err := json.Unmarshal(r, &p); err != nil {
			return nil, fmt.Errorf("content part: %v", err)
		}
		switch p.Type {
		case "text":
			if p.Text != "" {
				out = append(out, marshal(textBlock{Type: "text", Text: p.Text}))
			}
		case "image_url":
			out = append(out, imageBlock(p.ImageURL.URL))
		default:
			out = append(out, r)
		}
	}
	return out, nil
}

func imageBlock(url string) json.RawMessage {
	if rest, ok := strings.CutPrefix(url, "data:"); ok {
		if mediaType, data, ok := strings.Cut(rest, ";base64,"); ok {
			return marshal(map[string]any{"type": "image", "source": map[string]string{"type": "base64", "media_type": mediaType, "data": data}})
		}
	}
	return marshal(map[string]any{"type": "image", "source": map[string]string{"type": "url", "url": url}})
}
