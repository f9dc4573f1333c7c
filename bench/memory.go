package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// Figure 5: memory per idle session. A session is a tool loop around an
// installer around a router around a scripted model, the router running
// three async no-op tools (one tool actor each): 7 actors. Each session
// answers one request (so every actor is up), then idles; the figure is
// the growth of the Go heap after GC divided by the number of sessions.
// The baseline is the same number of bare protoactor actors.

// actorsPerSession is loop, installer, router, model and three tools.
const actorsPerSession = 7

// heapAfterGC returns HeapAlloc after two collections.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// sessionSpec is one idle session's stack.
func sessionSpec(model *scripted.Model, noops []*tools.Tool, name string) (actors.Spec, error) {
	router, err := tools.NewRouter(model.Spec("model"), &tools.RouterOptions{Name: "router", Tools: noops})
	if err != nil {
		return actors.Spec{}, err
	}
	installer, err := tools.NewInstaller(router, &tools.InstallerOptions{
		RouterOptions: tools.RouterOptions{Name: "installer"},
		ToolsParam:    tools.FunctionList(noops),
		ToolChoice:    json.RawMessage(`"auto"`),
		SystemPrompt:  "You run tools.",
	})
	if err != nil {
		return actors.Spec{}, err
	}
	return tools.NewLoop(installer, &tools.LoopOptions{RouterOptions: tools.RouterOptions{Name: name}})
}

// sessionMemory starts n sessions, plays one request on each, and returns
// the heap growth per session in KiB.
func sessionMemory(n int) (float64, error) {
	model, err := scripted.New(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{{Text: "ready"}}},
		&scripted.Options{MaxRecorded: -1})
	if err != nil {
		return 0, err
	}
	noops := noopTools(false)
	rt, err := actors.NewRuntime(runtimeOptions)
	if err != nil {
		return 0, err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = rt.Close(ctx)
	}()
	request := json.RawMessage(`[{"role":"user","content":"wait"}]`)
	before := heapAfterGC()
	conns := make([]*actors.Conn, n)
	for i := range conns {
		spec, err := sessionSpec(model, noops, "session-"+strconv.Itoa(i))
		if err != nil {
			return 0, err
		}
		if conns[i], err = rt.Start(spec); err != nil {
			return 0, err
		}
		if err := conns[i].SendAll(messages.RawParam("s", models.ParamMessages, request), messages.End("s")); err != nil {
			return 0, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, conn := range conns {
		frames, err := conn.RecvStream(ctx, "s")
		if err != nil {
			return 0, fmt.Errorf("session %d: %w", i, err)
		}
		if len(frames) < 2 || frames[0].GetText() != "ready" {
			return 0, fmt.Errorf("session %d answered %v", i, frames)
		}
	}
	after := heapAfterGC()
	runtime.KeepAlive(conns)
	return float64(int64(after)-int64(before)) / float64(n) / 1024, nil
}

type idleActor struct{}

func (idleActor) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*messages.Frame); ok {
		ctx.Respond(ctx.Message())
	}
}

// bareActorMemory spawns n × actorsPerSession bare protoactor actors and
// returns the heap growth per n in KiB.
func bareActorMemory(n int) (float64, error) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	defer system.Shutdown()
	props := actor.PropsFromProducer(func() actor.Actor { return idleActor{} })
	before := heapAfterGC()
	pids := make([]*actor.PID, 0, n*actorsPerSession)
	for range n * actorsPerSession {
		pids = append(pids, system.Root.Spawn(props))
	}
	// A round trip through each actor's mailbox, so that every one has
	// been started.
	tick := messages.Tick("s")
	for _, pid := range pids {
		if _, err := system.Root.RequestFuture(pid, tick, time.Minute).Result(); err != nil {
			return 0, err
		}
	}
	after := heapAfterGC()
	runtime.KeepAlive(pids)
	return float64(int64(after)-int64(before)) / float64(n) / 1024, nil
}
