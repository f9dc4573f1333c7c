package inspect_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/inspect"
	"github.com/polyweave/polyweave-go/tools"
)

// TestTools_LongNameHasOneRowAndSwitch: a tool whose name is longer than
// Options.Clip has its row of figures under the clipped name; its stall
// switch must be that row's, not a second row under the full name, and
// the page's stall button (which posts the row's name) must reach it,
// as must the host's full name.
func TestTools_LongNameHasOneRowAndSwitch(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	in, err := inspect.New(rt, &inspect.Options{Faults: true, Clip: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	long := strings.Repeat("x", 40)
	if _, err := in.Tools([]*tools.Tool{tools.MustNew(tools.Definition{Name: long,
		Handler: func(context.Context, json.RawMessage) (any, error) { return "ok", nil }})}); err != nil {
		t.Fatal(err)
	}
	rows := in.Snapshot("").Tools
	if len(rows) != 1 {
		t.Fatalf("one tool of a long name is listed in %d rows: %+v", len(rows), rows)
	}
	row := rows[0]
	if !row.Stallable || len(row.Name) >= len(long) {
		t.Fatalf("the long name's row %+v: want its clipped name, stallable", row)
	}
	if _, err := in.Stall(row.Name, true); err != nil {
		t.Fatalf("stall by the row's name: %v", err)
	}
	if tf := in.Snapshot("").Tools; len(tf) != 1 || !tf[0].Stalled {
		t.Errorf("after a stall by the row's name: %+v", tf)
	}
	if _, err := in.Stall(long, false); err != nil {
		t.Fatalf("release by the full name: %v", err)
	}
	if tf := in.Snapshot("").Tools; len(tf) != 1 || tf[0].Stalled {
		t.Errorf("after a release by the full name: %+v", tf)
	}
}
