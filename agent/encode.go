package agent

import (
	"encoding/json"
	"slices"
	"sync/atomic"

	"github.com/polyweave/polyweave-go/models"
)

// Hosts that start many conversations with the same messages (a task
// prompt run again and again, on one session after another) would have
// each Run encode the same list. An agent keeps the last list of text
// messages it encoded, with its encoding, and a Run whose messages are
// the same sends that encoding again: the payload of a frame is never
// changed, so the frames of any number of Runs can share it.

// maxKeptMessages bounds the list an agent keeps encoded: a short
// opening (a system prompt, a task), not a long history, which a host
// seldom sends twice.
const maxKeptMessages = 4

// maxKeptBytes bounds the encoding kept: an agent idle for long holds
// its last list, which must stay small.
const maxKeptBytes = 16 << 10

// keptMisses is how many Runs in a row whose messages differ from those
// kept replace them: a list kept until then (most hosts never send the
// same list twice) costs them no copy, and a host that switches to
// another repeated list gets it kept a few Runs later.
const keptMisses = 8

// encodedList is a list of text messages with its encoding. It is not
// changed once kept.
type encodedList struct {
	msgs    []models.Message // a copy of the caller's list
	payload json.RawMessage
}

// encodeCache is an agent's last list kept encoded.
type encodeCache struct {
	last   atomic.Pointer[encodedList]
	misses atomic.Uint32 // Runs since last was kept or last matched
}

// encode returns msgs encoded as a "messages" PARAM payload: the payload
// kept when msgs are the list kept, else msgs encoded (and kept, when
// they are short text messages and the last list kept has not matched
// keptMisses Runs in a row).
func (c *encodeCache) encode(msgs []models.Message) json.RawMessage {
	last := c.last.Load()
	if last != nil && slices.EqualFunc(last.msgs, msgs, sameText) {
		if c.misses.Load() != 0 {
			c.misses.Store(0)
		}
		return last.payload
	}
	payload := models.EncodeMessages(msgs)
	if !keepable(msgs) || len(payload) > maxKeptBytes || (last != nil && c.misses.Add(1) < keptMisses) {
		return payload
	}
	c.last.Store(&encodedList{msgs: slices.Clone(msgs), payload: payload})
	c.misses.Store(0)
	return payload
}

// keepable reports whether msgs can be kept encoded: a short list of
// messages whose fields are all strings, which a copy of the list holds
// as they are whatever the caller changes after (the size of the
// encoding is bounded too: see maxKeptBytes).
func keepable(msgs []models.Message) bool {
	if len(msgs) > maxKeptMessages {
		return false
	}
	for _, m := range msgs {
		if len(m.ToolCalls) > 0 || len(m.ThinkingBlocks) > 0 {
			return false
		}
	}
	return true
}

// sameText reports whether k, a kept message (text only), and m encode
// the same.
func sameText(k, m models.Message) bool {
	return k.Role == m.Role && k.Content == m.Content && k.ToolCallID == m.ToolCallID &&
		len(m.ToolCalls) == 0 && len(m.ThinkingBlocks) == 0
}
