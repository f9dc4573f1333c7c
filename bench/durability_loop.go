package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/tools"
)

// Loop-session durability figure: one tool-loop conversation whose model
// streams a call with a 1 MiB argument (in loopChunk-byte chunks), the
// sink tool takes it, and the model answers: durable (a resumable
// Session on a store) against the same loop without a Session. One op is
// one whole conversation, on a new loop (a session runs one conversation).

const (
	loopArgSize = 1 << 20
	loopChunk   = 256
)

// bigCallModel answers a request whose conversation has no tool message
// with one streaming call of a loopArgSize argument, and the follow-up
// with a short text. The frames are built once and shared.
func bigCallModel(frames []*messages.Frame) actors.Spec {
	answered := messages.Text("s", "Stored.")
	end := messages.End("s")
	return actors.Duplex("model", func(f *messages.Frame, emit func(*messages.Frame)) {
		if f.IsParam(models.ParamMessages) && strings.Contains(string(f.GetPayload()), `"role":"tool"`) {
			frames = []*messages.Frame{answered, end} // the follow-up: answer it
		}
		if f.GetType() != messages.FrameType_END {
			return
		}
		for _, out := range frames {
			emit(out)
		}
	})
}

// bigCallFrames is the model's streamed call: 1 MiB of arguments.
func bigCallFrames() []*messages.Frame {
	doc := `{"data":"` + strings.Repeat("x", loopArgSize-len(`{"data":""}`)) + `"}`
	frames := []*messages.Frame{messages.StreamingToolCall("s", "call", "sink")}
	for len(doc) > 0 {
		n := min(len(doc), loopChunk)
		frames = append(frames, messages.ToolArgChunk("s", "call", doc[:n]))
		doc = doc[n:]
	}
	return append(frames, messages.ToolComplete("s", "call"), messages.End("s"))
}

var loopSessions atomic.Int64 // names sessions across measurements

// benchLoopBigArg runs b.N conversations, each on a new loop; open (nil:
// no Session) makes the store the sessions persist in.
func benchLoopBigArg(b *testing.B, open storeOpener) {
	rt, err := actors.NewRuntime(nil)
	if err != nil {
		b.Fatal(err)
	}
	var store durability.Store
	if open != nil {
		store = open(b)
	}
	defer func() {
		rt.Close(context.Background())
		if store != nil {
			store.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conv := newBigArgConversation(rt, store)
	run := func() error { return conv.run(ctx) }
	if err := run(); err != nil { // warm up
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := run(); err != nil {
			b.Fatal(err)
		}
	}
}

// bigArgConversation plays the loop conversation of benchLoopBigArg on a
// runtime, each run on a new loop whose Session (if store is not nil)
// persists in store.
type bigArgConversation struct {
	rt     *actors.Runtime
	store  durability.Store
	frames []*messages.Frame
	first  *messages.Frame
}

func newBigArgConversation(rt *actors.Runtime, store durability.Store) *bigArgConversation {
	return &bigArgConversation{rt: rt, store: store, frames: bigCallFrames(),
		first: messages.RawParam("s", models.ParamMessages, json.RawMessage(`[{"role":"user","content":"store this"}]`))}
}

// run plays one conversation on a new loop and checks its answer.
func (c *bigArgConversation) run(ctx context.Context) error {
	n := loopSessions.Add(1)
	o := &tools.LoopOptions{RouterOptions: tools.RouterOptions{Name: fmt.Sprintf("loop-%d", n), Tools: []*tools.Tool{sinkTool}}}
	if c.store != nil {
		o.Session = &tools.SessionOptions{ID: fmt.Sprintf("session-%d", n), Store: c.store}
	}
	spec, err := tools.NewLoop(bigCallModel(c.frames), o)
	if err != nil {
		return err
	}
	conn, err := c.rt.Start(spec)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if err := conn.SendAll(c.first, messages.End("s")); err != nil {
		return err
	}
	got, err := conn.RecvStream(ctx, "s")
	if err != nil {
		return err
	}
	for _, f := range got {
		if f.GetType() == messages.FrameType_ERROR || f.IsErrorResult() {
			return fmt.Errorf("loop answered %s", messages.Format(f))
		}
	}
	if n := len(got); n < 2 || got[n-2].GetText() != "Stored." {
		return fmt.Errorf("loop ended without the answer: %d frames", n)
	}
	return nil
}
