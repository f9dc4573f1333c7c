package tooltest

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
)

// AskLoop starts loop on a runtime of its own, as a child process of a
// kill test does (see [ChildBody]), writes it one request on stream
// "main" whose messages (the models.ParamMessages parameter) are msgs,
// and returns what the loop answered on that stream within timeout. It
// closes the runtime before it returns.
func AskLoop(loop actors.Spec, msgs json.RawMessage, timeout time.Duration) ([]*messages.Frame, error) {
	rt, err := actors.NewRuntime(nil)
	if err != nil {
		return nil, err
	}
	defer rt.Close(context.Background())
	conn, err := rt.Start(loop)
	if err != nil {
		return nil, err
	}
	if err := conn.SendAll(messages.RawParam("main", models.ParamMessages, msgs), messages.End("main")); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return conn.RecvStream(ctx, "main")
}

// LastRequestMessages returns the messages (the models.ParamMessages
// parameter) of the last request model got.
func LastRequestMessages(model *scripted.Model) (json.RawMessage, error) {
	reqs := model.Requests()
	if len(reqs) == 0 {
		return nil, errors.New("the model got no request")
	}
	last, ok := reqs[len(reqs)-1].Request.Param(models.ParamMessages)
	if !ok {
		return nil, errors.New("the last request has no messages")
	}
	return last, nil
}
