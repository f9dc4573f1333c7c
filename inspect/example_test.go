package inspect_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/inspect"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// A host mounts the inspector of its runtime and gives it the hooks of
// what it should see; here the view is read as JSON after one
// conversation (a browser would open the page at the same address).
func ExampleNew() {
	rt, err := actors.NewRuntime(nil)
	if err != nil {
		panic(err)
	}
	defer rt.Close(context.Background())
	insp, err := inspect.New(rt, nil) // loopback clients only, no fault injection
	if err != nil {
		panic(err)
	}
	defer insp.Close()
	srv := httptest.NewServer(insp) // or: ln, _ := inspect.Listen("127.0.0.1:8080", nil); http.Serve(ln, insp)
	defer srv.Close()

	model := scripted.MustNew(scripted.Script{Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{ID: "call_1", Name: "echo", Arguments: `{"x":7}`}}},
		{Text: "done"},
	}}, nil)
	echo := tools.MustNewTyped(tools.Definition{Name: "echo", Description: "echoes x"},
		func(_ context.Context, in echoIn) (echoOut, error) { return echoOut(in), nil })
	loop, err := tools.NewLoop(insp.Model(model.Spec("model")), &tools.LoopOptions{
		RouterOptions: tools.RouterOptions{Name: "agent", Tools: []*tools.Tool{echo}},
		OnToolResult:  insp.OnToolResult,
	})
	if err != nil {
		panic(err)
	}
	conn, err := rt.Start(loop)
	if err != nil {
		panic(err)
	}
	msgs := models.EncodeMessages([]models.Message{models.UserMessage("echo seven")})
	if err := conn.SendAll(messages.RawParam("s1", models.ParamMessages, msgs), messages.End("s1")); err != nil {
		panic(err)
	}
	if _, err := conn.RecvStream(context.Background(), "s1"); err != nil {
		panic(err)
	}

	resp, err := srv.Client().Get(srv.URL + "/api/state?session=s1")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var snap inspect.Snapshot
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
		panic(err)
	}
	for _, n := range snap.Tree {
		fmt.Printf("%s%s (%s) %s\n", strings.Repeat("  ", n.Depth), n.Name, n.Role, n.State)
	}
	fmt.Println("answer:", snap.Session.Answer)
	echoFigures := snap.Tools[0]
	fmt.Println(echoFigures.Name, "calls:", echoFigures.Calls, "failed:", echoFigures.Failures)
	// Output:
	// polyweave (runtime) running
	//   agent (agent) running
	//     model (model adapter) running
	//     tool-echo (tool) running
	// answer: done
	// echo calls: 1 failed: 0
}
