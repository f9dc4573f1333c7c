package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	sdk "github.com/openai/openai-go/v3"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models/openai"
	"github.com/polyweave/polyweave-go/models/scripted"
)

// modelTurn is a typical tool turn: text in 3 deltas, then 3 calls (one
// streaming in 4 chunks), usage and finish.
var modelTurn = scripted.Turn{Text: "Let me write and run it.", Deltas: 3,
	Usage: &scripted.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15},
	ToolCalls: []scripted.ToolCall{
		{ID: "call_1", Name: "write_file", Arguments: `{"path":"main.go","content":"package main"}`, Split: 4},
		{ID: "call_2", Name: "run_command", Arguments: `{"command":"go run ."}`},
		{ID: "call_3", Name: "read_file", Arguments: `{"path":"out.txt"}`},
	}}

// scriptedTurnSpecs returns the scripted adapter playing modelTurn and a
// baseline duplex that answers END with the same frames, prebuilt (recorded
// from the adapter once): the ratio is the cost of the scripted adapter's
// request tracking and frame building.
func scriptedTurnSpecs(b *testing.B) (adapter, baseline actors.Spec) {
	model := scripted.MustNew(scripted.Script{Repeat: true, Turns: []scripted.Turn{modelTurn}}, &scripted.Options{MaxRecorded: -1})
	rt, conn := startModelBench(b, model.Spec("m"))
	sendModelTurn(b, conn)
	canned, _ := conn.RecvStream(context.Background(), "s")
	closeModelBench(b, rt)
	canned = canned[:len(canned)-1] // END is emitted by the baseline itself
	baseline = actors.Duplex("baseline", func(f *messages.Frame, emit func(*messages.Frame)) {
		if f.GetType() == messages.FrameType_END {
			for _, c := range canned {
				emit(c)
			}
			emit(messages.End(f.GetStreamId()))
		}
	})
	return model.Spec("m"), baseline
}

// benchModelTurns measures request/response turns per second through spec:
// PARAM + END in, the turn's frames out.
func benchModelTurns(b *testing.B, spec actors.Spec) {
	rt, conn := startModelBench(b, spec)
	defer closeModelBench(b, rt)
	b.ReportAllocs()
	for b.Loop() {
		sendModelTurn(b, conn)
		if _, err := conn.RecvStream(context.Background(), "s"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "turns/s")
}

var benchMessages = json.RawMessage(`[{"role":"user","content":"write, run and read"}]`)

func sendModelTurn(b *testing.B, conn *actors.Conn) {
	if err := conn.SendAll(messages.RawParam("s", "messages", benchMessages), messages.End("s")); err != nil {
		b.Fatal(err)
	}
}

func startModelBench(b *testing.B, spec actors.Spec) (*actors.Runtime, *actors.Conn) {
	rt, err := actors.NewRuntime(runtimeOptions)
	if err != nil {
		b.Fatal(err)
	}
	conn, err := rt.Start(spec)
	if err != nil {
		b.Fatal(err)
	}
	return rt, conn
}

func closeModelBench(b *testing.B, rt *actors.Runtime) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rt.Close(ctx); err != nil {
		b.Fatal(err)
	}
}

// openAIChunks is a streamed tool turn as Chat Completions chunks: text,
// three streaming calls, finish.
func openAIChunks() [][]byte {
	var chunks [][]byte
	add := func(delta string) {
		chunks = append(chunks, []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":`+delta+`,"finish_reason":null}]}`))
	}
	add(`{"role":"assistant","content":""}`)
	add(`{"content":"Let me check."}`)
	for i, id := range []string{"call_A", "call_B", "call_C"} {
		add(`{"tool_calls":[{"index":` + string(rune('0'+i)) + `,"id":"` + id + `","type":"function","function":{"name":"read_file","arguments":""}}]}`)
		for _, piece := range []string{`{\"pa`, `th\":\"`, strings.Repeat("x", 40), `.txt\"}`} {
			add(`{"tool_calls":[{"index":` + string(rune('0'+i)) + `,"function":{"arguments":"` + piece + `"}}]}`)
		}
	}
	chunks = append(chunks, []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`))
	return chunks
}

// benchOpenAIAccumulator measures streamed chunks per second decoded into
// the SDK's chunk type and, with accumulate, folded into an Accumulator.
func benchOpenAIAccumulator(b *testing.B, chunks [][]byte, accumulate bool) {
	b.ReportAllocs()
	for b.Loop() {
		var acc openai.Accumulator
		for _, data := range chunks {
			var c sdk.ChatCompletionChunk
			if err := json.Unmarshal(data, &c); err != nil {
				b.Fatal(err)
			}
			if accumulate {
				if _, err := acc.Add(&c); err != nil {
					b.Fatal(err)
				}
			}
		}
		if accumulate {
			if res, err := acc.Result(); err != nil || len(res.ToolCalls) != 3 {
				b.Fatalf("result %+v, %v", res, err)
			}
		}
	}
	b.ReportMetric(float64(b.N*len(chunks))/b.Elapsed().Seconds(), "chunks/s")
}
