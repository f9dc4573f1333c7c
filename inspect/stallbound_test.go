package inspect_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/inspect"
	"github.com/polyweave/polyweave-go/tools"
)

// TestTools_StallSwitchesAreBounded: a host that gives the inspector
// ever new tools (made per user, or imported from servers that come and
// go) must not grow its tool rows and stall switches for good: past
// MaxToolRows, the switch of a tool goes with its row, unless it is
// stalled. A tool whose switch went gets it back at its next call.
func TestTools_StallSwitchesAreBounded(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	in, err := inspect.New(rt, &inspect.Options{Faults: true})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	const made = inspect.MaxToolRows + 200
	var wrapped []*tools.Tool
	for i := range made {
		ts, err := in.Tools([]*tools.Tool{tools.MustNew(tools.Definition{Name: fmt.Sprintf("tool_%d", i),
			Handler: func(context.Context, json.RawMessage) (any, error) { return "ok", nil }})})
		if err != nil {
			t.Fatal(err)
		}
		wrapped = append(wrapped, ts[0])
		if i == 1 {
			if _, err := in.Stall("tool_1", true); err != nil {
				t.Fatal(err)
			}
		}
	}
	snap := in.Snapshot("")
	if n := len(snap.Tools); n > inspect.MaxToolRows+1 {
		t.Fatalf("%d tools given keep %d rows with stall switches, want at most MaxToolRows (%d) and the one stalled", made, n, inspect.MaxToolRows)
	}
	if tf := tool(snap, "tool_1"); !tf.Stallable {
		t.Errorf("the stalled tool_1 lost its switch: %+v", tf)
	}
	if _, err := in.Stall("tool_1", false); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Stall("tool_0", true); err == nil {
		t.Fatal("tool_0's switch kept past MaxToolRows")
	}
	if _, err := wrapped[0].Definition().Handler(testCtx(t), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Stall("tool_0", true); err != nil {
		t.Fatalf("tool_0 called again has no switch: %v", err)
	}
	if _, err := in.Stall("tool_0", false); err != nil {
		t.Fatal(err)
	}
}
