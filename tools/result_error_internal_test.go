package tools

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// A handler's *ResultError answers with its own payload and kind; without
// a valid payload it is answered as any error.
func TestResultError_OwnPayloadAndKind(t *testing.T) {
	cases := []struct {
		name        string
		err         error
		kind        FailureKind
		wantPayload string
	}{
		{"own payload", &ResultError{Payload: json.RawMessage(`{"success":false,"error":"e","path":"p"}`), Kind: FailureInvalidArguments, Err: errors.New("e")},
			FailureInvalidArguments, `{"success":false,"error":"e","path":"p"}`},
		{"no kind", &ResultError{Payload: json.RawMessage(`{"success":false}`)}, FailureHandler, `{"success":false}`},
		{"wrapped", errors.Join(errors.New("x"), &ResultError{Payload: json.RawMessage(`{"a":1}`), Kind: FailureInvalidArguments}),
			FailureInvalidArguments, `{"a":1}`},
		{"invalid payload", &ResultError{Payload: json.RawMessage(`{`), Kind: FailureInvalidArguments, Err: errors.New("broken")},
			FailureHandler, `{"success":false,"error":"broken"}`},
	}
	for _, c := range cases {
		tool, err := New(Definition{Name: "t", Handler: func(context.Context, json.RawMessage) (any, error) { return nil, c.err }})
		if err != nil {
			t.Fatal(err)
		}
		call := messages.ToolCall("s", "c", "t", json.RawMessage(`{}`))
		f := tool.resultFrame(call, tool.run(context.Background(), call, json.RawMessage(`{}`)))
		if !f.IsErrorResult() || KindOf(f) != c.kind || string(f.GetPayload()) != c.wantPayload {
			t.Errorf("%s: error %v kind %q payload %s, want kind %q payload %s", c.name, f.IsErrorResult(), KindOf(f),
				f.GetPayload(), c.kind, c.wantPayload)
		}
	}
}
