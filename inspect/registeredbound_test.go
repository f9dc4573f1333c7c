package inspect

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/tools"
)

// TestTools_NamesGivenWithoutFaultsAreBounded: a host giving ever new
// tools to Tools without Options.Faults (no switch, so nothing per tool
// to drop with its row) must not keep every name it ever gave.
func TestTools_NamesGivenWithoutFaultsAreBounded(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	in, err := New(rt, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	const given = 4 * maxRegistered
	for i := range given {
		if _, err := in.Tools([]*tools.Tool{tools.MustNew(tools.Definition{Name: fmt.Sprintf("tool_%d", i),
			Handler: func(context.Context, json.RawMessage) (any, error) { return "ok", nil }})}); err != nil {
			t.Fatal(err)
		}
	}
	in.mu.Lock()
	n := len(in.registered)
	in.mu.Unlock()
	if n > maxRegistered {
		t.Fatalf("%d tools given one by one keep %d names, want at most %d", given, n, maxRegistered)
	}
	// The names given last are the host's: their calls have rows of
	// their own, not counted among the model's made-up names.
	last := fmt.Sprintf("tool_%d", given-1)
	in.mu.Lock()
	st := in.toolStats(last)
	in.mu.Unlock()
	if st.other {
		t.Errorf("the tool given last, %s, is counted as a name the model made up", last)
	}
}
