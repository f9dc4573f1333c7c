package actors_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// embeddingHost is a host application's actor: it builds the runtime as
// its own child when it starts.
type embeddingHost struct{ ready chan<- *actors.Runtime }

func (h embeddingHost) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*actor.Started); ok {
		rt, err := actors.NewRuntime(&actors.RuntimeOptions{Parent: ctx})
		if err != nil {
			panic(err)
		}
		h.ready <- rt
	}
}

// A host that has an actor system and a supervision tree of its own
// embeds the runtime under one of its actors with RuntimeOptions.Parent:
// the runtime's top-level supervisor is that actor's child, the host's
// strategy decides about what the runtime escalates, and stopping the
// host actor stops every duplex of the runtime.
func ExampleRuntimeOptions_parent() {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	defer system.Shutdown()

	// The host's own strategy sees the runtime's escalations.
	hostStrategy := actor.NewOneForOneStrategy(3, time.Minute, func(reason any) actor.Directive {
		fmt.Println("host supervisor:", supervisor.ReasonError(reason))
		return actor.StopDirective
	})
	ready := make(chan *actors.Runtime, 1)
	host, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return embeddingHost{ready: ready} },
		actor.WithSupervisor(hostStrategy)), "app")
	if err != nil {
		panic(err)
	}
	rt := <-ready
	defer rt.Close(context.Background())
	fmt.Println("runtime host:", rt.Host().GetId())

	shout := actors.Duplex("shout", func(f *messages.Frame, emit func(*messages.Frame)) {
		if f.GetType() == messages.FrameType_TEXT {
			f = messages.Text(f.GetStreamId(), strings.ToUpper(f.GetText()))
		}
		emit(f)
	})
	conn, err := rt.Start(shout)
	if err != nil {
		panic(err)
	}
	fmt.Println("duplex:", conn.Ref().PID().GetId())
	_ = conn.SendAll(messages.Text("s1", "hello"), messages.End("s1"))
	frames, _ := conn.RecvStream(context.Background(), "s1")
	fmt.Println(messages.Format(frames[0]))

	// Stopping the host's actor stops the runtime's duplexes with it.
	_ = system.Root.StopFuture(host).Wait()
	_, err = conn.Recv(context.Background())
	fmt.Println("after the host stopped:", err)
	// Output:
	// runtime host: app/polyweave
	// duplex: app/polyweave/shout
	// TEXT stream=s1 text="HELLO"
	// after the host stopped: actors: duplex stopped
}
