package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/models/streaming"
	"github.com/polyweave/polyweave-go/tools"
)

// TestRun_BatchedFoldAnswersAsStream: a Run, which reads an attempt's
// frames in one batch once its stream has ended, answers what a Stream,
// which folds them one by one, answers: the same text (what the model
// said before its calls kept with their round), rounds, results, usage,
// finish and failure, and the same error, over retried attempts and
// failures of every kind.
func TestRun_BatchedFoldAnswersAsStream(t *testing.T) {
	usage := func(n int) *models.Usage {
		return &models.Usage{PromptTokens: n, CompletionTokens: n, TotalTokens: 2 * n}
	}
	scriptedModel := func(turns ...scripted.Turn) func(*testing.T) actors.Spec {
		return func(t *testing.T) actors.Spec {
			m, err := scripted.New(scripted.Script{Turns: turns}, nil)
			if err != nil {
				t.Fatal(err)
			}
			return m.Spec("model")
		}
	}
	failing := func(err error) func(*testing.T) actors.Spec {
		return func(*testing.T) actors.Spec {
			return streaming.Spec("model", func(context.Context, *models.Request, func(*messages.Frame)) ([]*messages.Frame, error) {
				return nil, err
			})
		}
	}
	for _, tc := range []struct {
		name  string
		model func(*testing.T) actors.Spec
	}{
		{"plain", scriptedModel(scripted.Turn{Text: "Hello there.", Deltas: 5, Usage: usage(3)})},
		{"more frames than a batch's room", scriptedModel(scripted.Turn{Text: "One long answer, told in many small pieces.", Deltas: 40, Usage: usage(4)})},
		{"rounds", scriptedModel(
			scripted.Turn{Text: "Let me echo it.", Deltas: 2, ToolCalls: []scripted.ToolCall{call("c1", "echo", `{"text":"hi"}`), call("c2", "echo", `{"text":"yo"}`)}, Usage: usage(1)},
			scripted.Turn{ToolCalls: []scripted.ToolCall{{ID: "c3", Name: "echo", Arguments: `{"text":"streamed"}`, Split: 3}}, Usage: usage(2)},
			scripted.Turn{Text: "It said hi.", Usage: usage(5)},
		)},
		{"unknown tool and bad arguments", scriptedModel(
			scripted.Turn{ToolCalls: []scripted.ToolCall{call("c1", "nope", `{}`), call("c2", "echo", `{"text":1}`)}},
			scripted.Turn{Text: "Both failed.", Finish: "length"},
		)},
		{"model error retried", scriptedModel(
			scripted.Turn{Text: "Half", ToolCalls: []scripted.ToolCall{call("c1", "echo", `{"text":"a"}`)}, Error: "upstream reset"},
			scripted.Turn{Text: "Whole.", Usage: usage(7)},
		)},
		{"model error every attempt", scriptedModel(
			scripted.Turn{Text: "No", Error: "upstream reset"},
			scripted.Turn{Text: "No", Error: "upstream reset"},
			scripted.Turn{Text: "No", Error: "upstream reset"},
		)},
		{"permanent failure", failing(models.Permanent(errors.New("HTTP 401: invalid key")))},
		{"transient failure", failing(errors.New("HTTP 503: try later"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := actorstest.NewRuntime(t, nil)
			opts := func() *agent.Options {
				return &agent.Options{Tools: []*tools.Tool{echo(nil)}, MaxAttempts: 3}
			}
			batched := newAgent(t, rt, tc.model(t), opts())
			ans, err := batched.Run(testCtx(t), "s", ask)
			var streamed *models.Answer
			var streamErr error
			for ev, e := range newAgent(t, rt, tc.model(t), opts()).Stream(testCtx(t), "s", ask) {
				if ev.Answer != nil {
					streamed = ev.Answer
				}
				streamErr = e
			}
			if got, want := answerJSON(t, ans), answerJSON(t, streamed); got != want {
				t.Errorf("Run answered\n%s\nStream answered\n%s", got, want)
			}
			if (err == nil) != (streamErr == nil) || err != nil && err.Error() != streamErr.Error() ||
				errors.Is(err, agent.ErrPermanent) != errors.Is(streamErr, agent.ErrPermanent) {
				t.Errorf("Run failed with %v, Stream with %v", err, streamErr)
			}
			var fe, sfe *agent.FailedError
			if errors.As(err, &fe) != errors.As(streamErr, &sfe) || fe != nil && (fe.Attempts != sfe.Attempts || fe.Uncounted != sfe.Uncounted) {
				t.Errorf("Run failed as %+v, Stream as %+v", fe, sfe)
			}
		})
	}
}

// answerJSON is what a host reads of ans.
func answerJSON(t *testing.T, ans *models.Answer) string {
	t.Helper()
	if ans == nil {
		return "null"
	}
	b, err := json.MarshalIndent(ans, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
