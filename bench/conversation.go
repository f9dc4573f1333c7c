package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/telemetry"
	"github.com/polyweave/polyweave-go/tools"
)

// Figure 7 (and issue 6's loop figure): the peers' conversation
// (bench/peers/README.md) played by our tool loop around the scripted
// adapter, and by a plain Go loop calling the same functions directly (the
// floor). One run: the user's message, three model turns each calling one
// no-op tool ({"n":k} → {"ok":true}), and a final turn answering "done".

// conversationTools are the three tools of the conversation.
var conversationTools = []string{"noop_a", "noop_b", "noop_c"}

const (
	userPrompt = "run the three tools"
	finalText  = "done"
)

type noopIn struct {
	N int `json:"n"`
	// Note is sent by the streaming variant only (streamedArguments).
	Note string `json:"note,omitempty"`
}

type noopOut struct {
	OK bool `json:"ok"`
}

// noopFunc is the function behind every no-op tool.
func noopFunc(_ context.Context, in noopIn) (noopOut, error) {
	if in.N < 1 || in.N > len(conversationTools) {
		return noopOut{}, fmt.Errorf("unexpected n %d", in.N)
	}
	if in.Note != "" {
		if err := streamedNoop(in); err != nil {
			return noopOut{}, err
		}
	}
	return noopOut{OK: true}, nil
}

// noopTools binds noopFunc as the three tools.
func noopTools(sync bool) []*tools.Tool {
	out := make([]*tools.Tool, len(conversationTools))
	for i, name := range conversationTools {
		out[i] = tools.MustNewTyped(tools.Definition{Name: name, Description: "no-op tool " + name, Sync: sync}, noopFunc)
	}
	return out
}

// conversationScript is the scripted model's side: turn k calls tool k.
// Runs are played one after the other on one adapter, so the n-th request
// gets turn n mod 4 (BySequence): the adapter then reads nothing of the
// request, as the peers' scripted models, which count the tool messages
// of a prompt they get as structured values, decode nothing either.
func conversationScript() scripted.Script {
	var turns []scripted.Turn
	for i, name := range conversationTools {
		turns = append(turns, scripted.Turn{ToolCalls: []scripted.ToolCall{
			{ID: "call_" + strconv.Itoa(i+1), Name: name, Arguments: fmt.Sprintf(`{"n":%d}`, i+1)},
		}})
	}
	return scripted.Script{Select: scripted.BySequence, Repeat: true, Turns: append(turns, scripted.Turn{Text: finalText})}
}

// loopConversation is our tool loop around the scripted adapter, started
// on its own runtime.
type loopConversation struct {
	rt      *actors.Runtime
	conn    *actors.Conn
	request json.RawMessage
	runs    int
	// streamed, for the streaming conversation, are the arguments each
	// surfaced call must carry, assembled from their chunks, and the
	// number of TEXT frames the answer comes in.
	streamed   []string
	textFrames int
}

func newLoopConversation(sync bool) (*loopConversation, error) {
	return newTappedConversation(sync, nil)
}

// newTappedConversation is newLoopConversation with the model adapter
// and the loop tapped by tel (when not nil).
func newTappedConversation(sync bool, tel *telemetry.Telemetry) (*loopConversation, error) {
	return startConversation(conversationScript(), sync, tel)
}

// startConversation starts our loop around a scripted model playing
// script, on its own runtime.
func startConversation(script scripted.Script, sync bool, tel *telemetry.Telemetry) (*loopConversation, error) {
	model, err := scripted.New(script, &scripted.Options{MaxRecorded: -1})
	if err != nil {
		return nil, err
	}
	modelSpec := model.Spec("model")
	if tel != nil {
		modelSpec = tel.Model(modelSpec, "scripted")
	}
	loop, err := tools.NewLoop(modelSpec, &tools.LoopOptions{
		RouterOptions: tools.RouterOptions{Tools: noopTools(sync)},
		MaxIterations: 10,
	})
	if err != nil {
		return nil, err
	}
	if tel != nil {
		loop = tel.Agent(loop)
	}
	rt, err := actors.NewRuntime(runtimeOptions)
	if err != nil {
		return nil, err
	}
	conn, err := rt.Start(loop)
	if err != nil {
		rt.Close(context.Background())
		return nil, err
	}
	request := models.EncodeMessages([]models.Message{models.UserMessage(userPrompt)})
	return &loopConversation{rt: rt, conn: conn, request: request}, nil
}

func (lc *loopConversation) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return lc.rt.Close(ctx)
}

// run plays one conversation on a fresh stream and checks it.
func (lc *loopConversation) run(ctx context.Context) error {
	lc.runs++
	id := "run-" + strconv.Itoa(lc.runs)
	if err := lc.conn.SendAll(messages.RawParam(id, models.ParamMessages, lc.request), messages.End(id)); err != nil {
		return err
	}
	calls, results, texts, text := 0, 0, 0, ""
	for {
		f, err := lc.conn.Recv(ctx) // one stream at a time: every frame is the run's
		if err != nil {
			return err
		}
		if f.GetStreamId() != id {
			return fmt.Errorf("frame of stream %q during run %q", f.GetStreamId(), id)
		}
		switch f.GetType() {
		case messages.FrameType_TOOL_CALL:
			if lc.streamed != nil && (calls >= len(lc.streamed) || string(f.GetPayload()) != lc.streamed[calls]) {
				return fmt.Errorf("call %d assembled as %s", calls+1, f.GetPayload())
			}
			calls++
		case messages.FrameType_TOOL_RESULT:
			if f.IsErrorResult() {
				return fmt.Errorf("tool %s failed: %s", f.GetName(), f.GetPayload())
			}
			results++
		case messages.FrameType_TEXT:
			text += f.GetText()
			texts++
		case messages.FrameType_ERROR:
			return fmt.Errorf("conversation failed: %s", f.GetText())
		}
		if f.GetType() == messages.FrameType_END {
			break
		}
	}
	if results != len(conversationTools) || text != finalText || (lc.textFrames > 0 && texts != lc.textFrames) {
		return fmt.Errorf("conversation strayed: %d results, text %q in %d frames", results, text, texts)
	}
	return nil
}

// benchLoopConversation measures runs of our loop (tools Sync, run inline
// by the loop, or async on tool actors).
func benchLoopConversation(b *testing.B, sync bool) {
	lc, err := newLoopConversation(sync)
	if err != nil {
		b.Fatal(err)
	}
	benchRuns(b, lc)
}

// benchRuns measures runs of lc (after one to warm up), closing it at the
// end.
func benchRuns(b *testing.B, lc *loopConversation) {
	defer lc.Close()
	ctx := context.Background()
	if err := lc.run(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for range b.N {
		if err := lc.run(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportRuns(b, b.N, processCPU()-cpu)
}

// The floor: the same conversation as a plain Go loop, with the messages
// in the OpenAI chat shape, the model a function of them and the tools
// called directly (arguments decoded, results encoded).

// floorModel answers from the number of tool messages, as the peers do.
func floorModel(msgs []models.Message) models.Message {
	seen := 0
	for _, m := range msgs {
		if m.Role == models.RoleTool {
			seen++
		}
	}
	if seen >= len(conversationTools) {
		return models.AssistantMessage(finalText)
	}
	return models.AssistantMessage("", models.ToolCall{ID: "call_" + strconv.Itoa(seen+1), Name: conversationTools[seen],
		Arguments: json.RawMessage(`{"n":` + strconv.Itoa(seen+1) + `}`)})
}

// floorRun plays one conversation.
func floorRun(ctx context.Context, fns map[string]func(context.Context, noopIn) (noopOut, error)) error {
	msgs := []models.Message{models.UserMessage(userPrompt)}
	for range 10 {
		reply := floorModel(msgs)
		msgs = append(msgs, reply)
		if len(reply.ToolCalls) == 0 {
			if reply.Content != finalText {
				return fmt.Errorf("final text %q", reply.Content)
			}
			return nil
		}
		for _, c := range reply.ToolCalls {
			fn, ok := fns[c.Name]
			if !ok {
				return fmt.Errorf("unknown tool %s", c.Name)
			}
			var in noopIn
			if err := json.Unmarshal(c.Arguments, &in); err != nil {
				return err
			}
			out, err := fn(ctx, in)
			if err != nil {
				return err
			}
			res, err := json.Marshal(out)
			if err != nil {
				return err
			}
			msgs = append(msgs, models.ToolMessage(c.ID, res))
		}
	}
	return fmt.Errorf("no final answer")
}

func benchFloorConversation(b *testing.B) {
	fns := map[string]func(context.Context, noopIn) (noopOut, error){}
	for _, name := range conversationTools {
		fns[name] = noopFunc
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := floorRun(ctx, fns); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
}
