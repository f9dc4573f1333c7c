package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/tools/tooltest"
)

type greetIn struct {
	Name  string `json:"name" jsonschema:"who to greet"`
	Shout bool   `json:"shout,omitempty"`
}

type greetOut struct {
	Greeting string `json:"greeting"`
}

func typedGreet() *tools.Tool {
	return tools.MustNewTyped(tools.Definition{Name: "greet", Description: "Returns a greeting"},
		func(ctx context.Context, in greetIn) (greetOut, error) {
			g := "Hello, " + in.Name
			if in.Shout {
				g = strings.ToUpper(g)
			}
			return greetOut{Greeting: g}, nil
		})
}

// sleeper waits until its context is cancelled when asked to.
func sleeper(sync bool) *tools.Tool {
	return tools.MustNew(tools.Definition{Name: "sleeper", Sync: sync,
		Schema: json.RawMessage(`{"type":"object","properties":{"wait":{"type":"boolean"}}}`),
		Handler: func(ctx context.Context, args json.RawMessage) (any, error) {
			var in struct{ Wait bool }
			_ = json.Unmarshal(args, &in)
			if in.Wait {
				<-ctx.Done()
				return nil, fmt.Errorf("interrupted: %w", ctx.Err())
			}
			return map[string]bool{"slept": false}, nil
		}})
}

func TestConformance(t *testing.T) {
	t.Run("typed", func(t *testing.T) {
		tooltest.Run(t, typedGreet(), &tooltest.Options{
			ValidArgs:   json.RawMessage(`{"name":"Ada"}`),
			InvalidArgs: []json.RawMessage{json.RawMessage(`{}`), json.RawMessage(`{"name":1}`), json.RawMessage(`{"name":"a","extra":1}`)},
		})
	})
	t.Run("async", func(t *testing.T) {
		tooltest.Run(t, sleeper(false), &tooltest.Options{
			SlowArgs:    json.RawMessage(`{"wait":true}`),
			InvalidArgs: []json.RawMessage{json.RawMessage(`{"wait":"yes"}`), json.RawMessage(`[]`)},
		})
	})
	t.Run("sync", func(t *testing.T) {
		tooltest.Run(t, sleeper(true), nil)
	})
	t.Run("default", func(t *testing.T) { tooltest.Run(t, tools.MustNew(tools.Definition{}), nil) })
}

func TestNewTyped_SchemaInferredAndUsed(t *testing.T) {
	tool := typedGreet()
	var schema struct {
		Type       string                     `json:"type"`
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(tool.Description().Schema, &schema); err != nil {
		t.Fatal(err)
	}
	if schema.Type != "object" || len(schema.Required) != 1 || schema.Required[0] != "name" || len(schema.Properties) != 2 {
		t.Fatalf("inferred schema %s", tool.Description().Schema)
	}
	if len(tool.Description().OutputSchema) == 0 {
		t.Error("no output schema inferred")
	}
	if _, err := tools.NewTyped(tools.Definition{Handler: greet}, func(context.Context, greetIn) (greetOut, error) {
		return greetOut{}, nil
	}); err == nil {
		t.Error("a typed tool accepted a Handler")
	}
}
