package main

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/polyweave/polyweave-go/models/scripted"
)

// Figure 7, streaming against streaming: the conversation of figure 7
// with the scripted model streaming, as a provider's streaming API does.
// Each call's arguments ({"n":k} with a note, so that they take several
// chunks) come in streamArgChunk-byte chunks, which the loop assembles
// with the streaming router's Assembler and runs at their completion;
// the final answer comes in streamTextDelta-byte deltas. The peers play
// the same stream (bench/peers/README.md): Eino's ReAct agent in Stream
// mode, the AI SDK's streamText.

const (
	streamArgChunk  = 8
	streamTextDelta = 1
)

// streamedArguments are the arguments of the k-th call (from 1) of the
// streaming conversation.
func streamedArguments(k int) string {
	return `{"n":` + strconv.Itoa(k) + `,"note":"call ` + strconv.Itoa(k) + ` of 3, streamed in 8-byte chunks"}`
}

// chunks cuts s into pieces of n bytes (the last one shorter).
func chunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

// streamingScript is the scripted model's side of the streaming
// conversation: turn k streams a call of tool k, the last turn streams
// the answer.
func streamingScript() scripted.Script {
	var turns []scripted.Turn
	for i, name := range conversationTools {
		turns = append(turns, scripted.Turn{ToolCalls: []scripted.ToolCall{
			{ID: "call_" + strconv.Itoa(i+1), Name: name, Chunks: chunks(streamedArguments(i+1), streamArgChunk)},
		}})
	}
	return scripted.Script{Select: scripted.BySequence, Repeat: true,
		Turns: append(turns, scripted.Turn{Text: finalText, Deltas: len(finalText) / streamTextDelta})}
}

// benchStreamingConversation measures runs of our loop on the streaming
// conversation, tools sync.
func benchStreamingConversation(b *testing.B) {
	lc, err := newStreamingConversation()
	if err != nil {
		b.Fatal(err)
	}
	benchRuns(b, lc)
}

// newStreamingConversation starts our loop on the streaming conversation.
func newStreamingConversation() (*loopConversation, error) {
	lc, err := startConversation(streamingScript(), true, nil)
	if err != nil {
		return nil, err
	}
	for k := range conversationTools {
		lc.streamed = append(lc.streamed, streamedArguments(k+1))
	}
	lc.textFrames = len(finalText) / streamTextDelta
	return lc, nil
}

// streamedNoop checks the arguments of the streaming conversation's calls.
func streamedNoop(in noopIn) error {
	if want := fmt.Sprintf("call %d of 3, streamed in 8-byte chunks", in.N); in.Note != want {
		return fmt.Errorf("note %q, want %q", in.Note, want)
	}
	return nil
}
