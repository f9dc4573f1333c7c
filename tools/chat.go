package tools

import (
	"encoding/json"
	"unsafe"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
)

// The stages keep a conversation as the raw JSON elements of its
// "messages" PARAM (models.SplitMessages) and add the messages they write
// encoded once (models.Message): a follow-up joins them without decoding
// or re-encoding what is already there.

func encodeMessage(m models.Message) json.RawMessage { return m.AppendJSON(nil) }

func systemMessage(prompt string) json.RawMessage {
	return encodeMessage(models.SystemMessage(prompt))
}

// assistantMessage is the assistant turn that made calls, as accumulated,
// with the reasoning blocks the model needs back (nil when none). few is
// room for the calls of a response that makes few.
func assistantMessage(text string, calls []*messages.Frame, thinking json.RawMessage, few *[4]models.ToolCall) models.Message {
	tc := few[:0]
	for i, c := range calls {
		tc = append(tc, models.ToolCall{Index: i, ID: c.GetToolCallId(), Name: c.GetName(), Arguments: c.GetPayload()})
	}
	m := models.AssistantMessage(text, tc...)
	m.ThinkingBlocks = thinking
	return m
}

// toolMessage answers one call: content is the result JSON as a string,
// the frame's payload itself (never changed) rather than a copy, which
// every encoding of the message made for a result longer than 32 bytes.
func toolMessage(result *messages.Frame) models.Message {
	p := result.GetPayload()
	return models.Message{Role: models.RoleTool, ToolCallID: result.GetToolCallId(), Content: unsafe.String(unsafe.SliceData(p), len(p))}
}
