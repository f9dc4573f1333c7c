package models

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// Roles of a [Message].
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one message of a conversation, the element of the
// "messages" PARAM. It encodes to and decodes from the OpenAI chat shape:
//
//	{"role":"system"|"user","content":"..."}
//	{"role":"assistant","content":"..."|null,"tool_calls":[{"id","type":"function","function":{"name","arguments":"<JSON text>"}}]}
//	{"role":"tool","tool_call_id":"...","content":"<result JSON text>"}
//
// [Message.AppendJSON] and [EncodeMessages] encode strings without HTML
// escaping: "<", ">" and "&" reach the model as themselves (json.Marshal
// escapes them again in whatever a MarshalJSON returns). An assistant message with tool calls and no text
// encodes its content as null. Decoding accepts content as a string,
// null, or an array of parts whose "text" fields are joined.
//
// A Message is a plain value; the zero Message is not a valid message.
type Message struct {
	Role    string
	Content string
	// ToolCalls are the calls of an assistant message. Only ID, Name and
	// Arguments are encoded; decoding sets Index to the position.
	ToolCalls []ToolCall
	// ToolCallID is the call a tool message answers.
	ToolCallID string
	// ThinkingBlocks are the reasoning blocks of an assistant message that
	// a model requires back (the payload of a META [MetaThinkingBlocks]
	// frame), encoded as "thinking_blocks" when set.
	ThinkingBlocks json.RawMessage
}

// SystemMessage returns a system message.
func SystemMessage(content string) Message { return Message{Role: RoleSystem, Content: content} }

// UserMessage returns a user message.
func UserMessage(content string) Message { return Message{Role: RoleUser, Content: content} }

// AssistantMessage returns an assistant message with its text (possibly
// empty) and the calls it made.
func AssistantMessage(content string, calls ...ToolCall) Message {
	return Message{Role: RoleAssistant, Content: content, ToolCalls: calls}
}

// ToolMessage returns the message answering the call callID with the
// result JSON (a tool's TOOL_RESULT payload), sent to the model as text.
func ToolMessage(callID string, result json.RawMessage) Message {
	return Message{Role: RoleTool, ToolCallID: callID, Content: string(result)}
}

// MarshalJSON encodes m in the OpenAI chat shape.
func (m Message) MarshalJSON() ([]byte, error) { return m.AppendJSON(nil), nil }

// AppendJSON appends m's JSON encoding to b. It never fails: every field
// is a string, and arguments are sent as text. b grows at most once.
func (m Message) AppendJSON(b []byte) []byte {
	b = slices.Grow(b, m.encodedLen())
	b = append(b, `{"role":`...)
	b = appendString(b, m.Role)
	b = append(b, `,"content":`...)
	if m.Content == "" && m.Role == RoleAssistant && len(m.ToolCalls) > 0 {
		b = append(b, "null"...)
	} else {
		b = appendString(b, m.Content)
	}
	if len(m.ToolCalls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		for i, c := range m.ToolCalls {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = appendString(b, c.ID)
			b = append(b, `,"type":"function","function":{"name":`...)
			b = appendString(b, c.Name)
			b = append(b, `,"arguments":`...)
			args := bytesString(c.Arguments)
			if args == "" {
				args = "{}"
			}
			b = appendString(b, args)
			b = append(b, "}}"...)
		}
		b = append(b, ']')
	}
	if m.ToolCallID != "" {
		b = append(b, `,"tool_call_id":`...)
		b = appendString(b, m.ToolCallID)
	}
	if len(m.ThinkingBlocks) > 0 {
		b = append(b, `,"thinking_blocks":`...)
		b = append(b, m.ThinkingBlocks...)
	}
	return append(b, '}')
}

// encodedLen is the length of m's encoding by AppendJSON.
// EncodedLen is the length of m's JSON encoding, what [Message.AppendJSON]
// appends: room for several messages can be made at once.
func (m Message) EncodedLen() int { return m.encodedLen() }

func (m Message) encodedLen() int {
	n := len(`{"role":,"content":}`) + stringLen(m.Role)
	if m.Content == "" && m.Role == RoleAssistant && len(m.ToolCalls) > 0 {
		n += len("null")
	} else {
		n += stringLen(m.Content)
	}
	if len(m.ToolCalls) > 0 {
		n += len(`,"tool_calls":[]`) + len(m.ToolCalls) - 1
		for _, c := range m.ToolCalls {
			n += len(`{"id":,"type":"function","function":{"name":,"arguments":}}`) + stringLen(c.ID) + stringLen(c.Name)
			if len(c.Arguments) == 0 {
				n += len(`"{}"`)
			} else {
				n += stringLen(bytesString(c.Arguments))
			}
		}
	}
	if m.ToolCallID != "" {
		n += len(`,"tool_call_id":`) + stringLen(m.ToolCallID)
	}
	if len(m.ThinkingBlocks) > 0 {
		n += len(`,"thinking_blocks":`) + len(m.ThinkingBlocks)
	}
	return n
}

// messageJSON is the decoding shape of a Message.
type messageJSON struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	Thinking   json.RawMessage `json:"thinking_blocks"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// UnmarshalJSON decodes a message in the OpenAI chat shape.
func (m *Message) UnmarshalJSON(data []byte) error {
	var v messageJSON
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	content, err := decodeContent(v.Content)
	if err != nil {
		return fmt.Errorf("message with role %q: %w", v.Role, err)
	}
	*m = Message{Role: v.Role, Content: content, ToolCallID: v.ToolCallID}
	if len(v.Thinking) > 0 && string(v.Thinking) != "null" {
		m.ThinkingBlocks = v.Thinking
	}
	for i, c := range v.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, ToolCall{Index: i, ID: c.ID, Name: c.Function.Name,
			Arguments: json.RawMessage(c.Function.Arguments)})
	}
	return nil
}

func decodeContent(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("content is neither a string nor an array of parts: %w", err)
	}
	var sb strings.Builder
	for _, p := range parts {
		sb.WriteString(p.Text)
	}
	return sb.String(), nil
}

// EncodeMessages returns msgs as the JSON array of a "messages" PARAM.
func EncodeMessages(msgs []Message) json.RawMessage {
	n := 2 + len(msgs)
	for _, m := range msgs {
		n += m.encodedLen()
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, m := range msgs {
		if i > 0 {
			b = append(b, ',')
		}
		b = m.AppendJSON(b)
	}
	return append(b, ']')
}

// DecodeMessages reads the JSON array of a "messages" PARAM.
func DecodeMessages(payload []byte) ([]Message, error) {
	var msgs []Message
	if err := json.Unmarshal(payload, &msgs); err != nil {
		return nil, fmt.Errorf("decode messages: %w", err)
	}
	return msgs, nil
}

// JoinMessages joins messages that are each valid JSON already (elements
// of a decoded "messages" PARAM, or encoded with [Message.AppendJSON])
// into a JSON array, copying them as they are: re-encoding a long
// conversation at every follow-up would validate it all again. A nil
// element becomes null.
func JoinMessages(list []json.RawMessage) json.RawMessage {
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

// SplitMessages reads the JSON array of a "messages" PARAM into its raw
// elements, without decoding them (see [JoinMessages]). The elements are
// slices of payload, not copies (a frame's payload is never changed):
// change neither while the other is in use.
func SplitMessages(payload []byte) ([]json.RawMessage, error) {
	list, null, err := splitMessages(nil, payload)
	switch {
	case err != nil || null:
		return nil, err // null: as json.Unmarshal leaves a nil slice
	case list == nil:
		return []json.RawMessage{}, nil
	}
	return list, nil
}

// AppendSplitMessages is [SplitMessages] appending the elements to dst,
// for a caller that keeps the storage of its lists from one conversation
// to the next; a null payload appends nothing.
func AppendSplitMessages(dst []json.RawMessage, payload []byte) ([]json.RawMessage, error) {
	list, _, err := splitMessages(dst, payload)
	if err != nil {
		return dst, err
	}
	return list, nil
}

func splitMessages(list []json.RawMessage, payload []byte) (_ []json.RawMessage, null bool, _ error) {
	if !json.Valid(payload) {
		var list []json.RawMessage
		err := json.Unmarshal(payload, &list) // for its error's wording
		return nil, false, fmt.Errorf("decode messages: %w", err)
	}
	rest := skipSpace(payload)
	if len(rest) == 0 || rest[0] != '[' {
		if bytes.Equal(rest, []byte("null")) {
			return list, true, nil
		}
		return nil, false, fmt.Errorf("decode messages: a %s is not an array", jsonKind(rest[0]))
	}
	rest = skipSpace(rest[1:])
	if rest[0] == ']' {
		return list, false, nil
	}
	if list == nil {
		list = make([]json.RawMessage, 0, 1+bytes.Count(rest, []byte(`"role"`)))
	}
	for {
		n := valueEnd(rest)
		list = append(list, json.RawMessage(rest[:n:n]))
		rest = skipSpace(rest[n:])
		if rest[0] == ']' {
			return list, false, nil
		}
		rest = skipSpace(rest[1:]) // the comma
	}
}

// skipSpace returns b without its leading JSON whitespace.
func skipSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}

// valueEnd returns the length of the JSON value b starts with; b is
// valid JSON from there on (a value followed by more of its container).
func valueEnd(b []byte) int {
	depth, inString := 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
				if depth == 0 {
					return i + 1
				}
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i // the container's end after a scalar
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i // the end of a scalar
			}
		}
	}
	return len(b)
}

// jsonKind names the kind of the JSON value starting with c.
func jsonKind(c byte) string {
	switch c {
	case '{':
		return "object"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	}
	return "number"
}

const hexDigits = "0123456789abcdef"

// bytesString is b as a string without a copy, for reading it during the
// call only (appendString and stringLen keep nothing of it).
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// stringLen is the length of s encoded by appendString.
func stringLen(s string) int {
	n := 2 + len(s)
	for i := 0; i < len(s); {
		c := s[i]
		if x := escapeExtra[c]; x != multiByte {
			n += int(x)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			n += len(`\ufffd`) - 1
		}
		i += size
	}
	return n
}

// escapeExtra is what appendString writes for a byte beyond the byte
// itself: nothing for most of ASCII, 1 for a two-byte escape, 5 for
// \u00XX; multiByte marks the bytes of longer UTF-8 sequences.
var escapeExtra = func() (t [256]uint8) {
	for c := range t {
		switch {
		case c >= utf8.RuneSelf:
			t[c] = multiByte
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
			t[c] = 1
		case c < 0x20:
			t[c] = 5
		}
	}
	return t
}()

const multiByte = 0xff

// appendString appends s as a JSON string: quotes, backslashes and control
// characters escaped, invalid UTF-8 replaced by U+FFFD, nothing else
// (no HTML escaping).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
