package actors_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
)

// A wrapper owns an inner duplex and sees the frames going in and coming
// out. Here the response hook adds an exclamation mark to what a
// shouting "model" says.
func ExampleWrap() {
	rt, err := actors.NewRuntime(nil)
	if err != nil {
		panic(err)
	}
	defer rt.Close(context.Background())

	model := actors.Duplex("model", func(f *messages.Frame, emit func(*messages.Frame)) {
		if f.GetType() == messages.FrameType_TEXT {
			f = messages.Text(f.GetStreamId(), strings.ToUpper(f.GetText()))
		}
		emit(f)
	})
	loud := actors.Wrap("loud", model, func() actors.Wrapped {
		return actors.Hooks{OnResponse: func(c actors.WrapperContext, f *messages.Frame) {
			if f.GetType() == messages.FrameType_TEXT {
				f = messages.Text(f.GetStreamId(), f.GetText()+"!")
			}
			c.ToOuter(f)
		}}
	})

	conn, err := rt.Start(loud)
	if err != nil {
		panic(err)
	}
	_ = conn.SendAll(messages.Text("s1", "hello"), messages.End("s1"))
	frames, err := conn.RecvStream(context.Background(), "s1")
	if err != nil {
		panic(err)
	}
	for _, f := range frames {
		fmt.Println(messages.Format(f))
	}
	// Output:
	// TEXT stream=s1 text="HELLO!"
	// END stream=s1
}
