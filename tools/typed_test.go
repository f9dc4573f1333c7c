package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// TestTyped_IntegerValuedNumberIsNotAHandlerFailure: JSON Schema's
// "integer", inferred for an int field, accepts 2.0, which models write;
// the function gets 2. Were it a handler failure, five such calls would
// open the tool's circuit breaker and a well-formed call would be
// answered "temporarily unavailable".
func TestTyped_IntegerValuedNumberIsNotAHandlerFailure(t *testing.T) {
	type in struct {
		N int `json:"n"`
	}
	double := tools.MustNewTyped(tools.Definition{Name: "double"},
		func(_ context.Context, a in) (int, error) { return 2 * a.N, nil })
	var turns []scripted.Turn
	for i := range 5 { // one call per round: the breaker sees them one after the other
		turns = append(turns, scripted.Turn{ToolCalls: []scripted.ToolCall{{ID: fmt.Sprint("float", i), Name: "double", Arguments: `{"n":2.0}`}}})
	}
	turns = append(turns, scripted.Turn{ToolCalls: []scripted.ToolCall{{ID: "int", Name: "double", Arguments: `{"n":2}`}}}, scripted.Turn{Text: "done"})
	model := scripted.MustNew(scripted.Script{Turns: turns}, nil)
	loop, err := tools.NewLoop(model.Spec("model"), &tools.LoopOptions{
		RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{double}},
		MaxIterations: 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	conn := start(t, newRuntime(t), loop)
	send(t, conn, messages.RawParam("s1", models.ParamMessages, models.EncodeMessages([]models.Message{models.UserMessage("Double 2.")})),
		messages.End("s1"))
	frames, err := conn.RecvStream(testCtx(t), "s1")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range frames {
		if f.GetType() != messages.FrameType_TOOL_RESULT {
			continue
		}
		n++
		if string(f.GetPayload()) != "4" {
			t.Errorf("%s answered %s (%q), want 4", f.GetToolCallId(), f.GetPayload(), tools.KindOf(f))
		}
	}
	if n != 6 {
		t.Errorf("%d results, want 6: %q", n, lines(frames))
	}
}

// TestTyped_NumbersTheSchemaAccepts: a number the inferred schema accepts
// reaches the function as the value it is, an integral one written with
// a fraction or an exponent included; one the schema refuses, or that the
// Go type cannot hold, is answered invalid_arguments, which does not
// count against the tool's circuit breaker, and the function does not run.
func TestTyped_NumbersTheSchemaAccepts(t *testing.T) {
	type in struct {
		N int     `json:"n,omitempty"`
		B int8    `json:"b,omitempty"`
		U uint    `json:"u,omitempty"`
		F float32 `json:"f,omitempty"`
		L []int   `json:"l,omitempty"`
	}
	echo := tools.MustNewTyped(tools.Definition{Name: "echo", Sync: true}, func(_ context.Context, a in) (string, error) {
		return fmt.Sprint(a.N, a.B, a.U, a.F, a.L), nil
	})
	for _, c := range []struct {
		args string
		want string // the echo, or what the error says
		kind tools.FailureKind
	}{
		{`{"n":2}`, "2 0 0 0 []", ""},
		{`{"n":2.0}`, "2 0 0 0 []", ""},
		{`{"n":2e0}`, "2 0 0 0 []", ""},
		{`{"n":20E-1}`, "2 0 0 0 []", ""},
		{`{"n":2.50e1,"b":1.27e2,"u":-0.0}`, "25 127 0 0 []", ""},
		{`{"n":-9.223372036854775808e18}`, "-9223372036854775808 0 0 0 []", ""},
		{`{"l":[1.0,2e0,3],"f":2.5}`, "0 0 0 2.5 [1 2 3]", ""},
		{`{"n":2.5}`, `/n: expected integer, got number`, tools.FailureInvalidArguments},
		{`{"n":2.000000000000000001}`, `/n: expected integer, got number`, tools.FailureInvalidArguments},
		{`{"b":300}`, `/b: must be <= 127`, tools.FailureInvalidArguments},
		{`{"u":-1}`, `/u: must be >= 0`, tools.FailureInvalidArguments},
		{`{"n":1e30}`, `invalid arguments for tool "echo": /n: must be <=`, tools.FailureInvalidArguments},
		{`{"n":9.3e18}`, `/n: must be <=`, tools.FailureInvalidArguments},
		{`{"f":1e39}`, `/f: must be <`, tools.FailureInvalidArguments},
		{`{"l":[1,1e20]}`, `/l/1: must be <=`, tools.FailureInvalidArguments},
	} {
		var r actorstest.Recorder
		deliver(t, &r, echo.Logic(), messages.ToolCall("s", "c", "echo", json.RawMessage(c.args)))
		res := r.Emitted[0]
		if c.kind == "" {
			var got string
			if err := res.Decode(&got); err != nil || tools.KindOf(res) != "" || got != c.want {
				t.Errorf("%s: result %s (%q), want %q", c.args, res.GetPayload(), tools.KindOf(res), c.want)
			}
			continue
		}
		var e messages.ErrorResult
		if err := res.Decode(&e); err != nil || tools.KindOf(res) != c.kind || !strings.Contains(e.Error, c.want) {
			t.Errorf("%s: result %s (%q), want %q of kind %q", c.args, res.GetPayload(), tools.KindOf(res), c.want, c.kind)
		}
	}
}
