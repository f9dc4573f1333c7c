package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// A dispatcher finds a few tools by scanning them and many through a map:
// either way each call reaches the tool it names, and a name it does not
// know gets the unknown-tool result.
func TestDispatcher_FindsEachToolByName(t *testing.T) {
	for _, n := range []int{1, 3, 8, 9, 20} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var all []*tools.Tool
			for i := range n {
				all = append(all, tools.MustNew(tools.Definition{Name: fmt.Sprintf("t%d", i), Sync: true,
					Handler: func(context.Context, json.RawMessage) (any, error) { return i, nil }}))
			}
			spec, err := tools.NewCallRunner(&tools.RouterOptions{Tools: all})
			if err != nil {
				t.Fatal(err)
			}
			var r actorstest.Recorder
			l := spec.New()
			if err := r.Deliver(l, actors.Started{}); err != nil {
				t.Fatal(err)
			}
			for i := n - 1; i >= 0; i-- {
				r.Emitted = nil
				id := fmt.Sprintf("c%d", i)
				if err := r.Deliver(l, messages.ToolCall("s"+id, id, fmt.Sprintf("t%d", i), json.RawMessage(`{}`))); err != nil {
					t.Fatal(err)
				}
				if len(r.Emitted) == 0 || r.Emitted[0].GetToolCallId() != id || tools.KindOf(r.Emitted[0]) != "" ||
					string(r.Emitted[0].GetPayload()) != fmt.Sprint(i) {
					t.Fatalf("call of t%d: %v, want its result %d", i, r.Emitted, i)
				}
			}
			r.Emitted = nil
			if err := r.Deliver(l, messages.ToolCall("sx", "cx", "nope", json.RawMessage(`{}`))); err != nil {
				t.Fatal(err)
			}
			if len(r.Emitted) == 0 || tools.KindOf(r.Emitted[0]) != tools.FailureUnknownTool {
				t.Fatalf("call of an unknown tool: %v, want the unknown-tool result", r.Emitted)
			}
		})
	}
}
