package inspect

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// resultOf records a successful result of a call of tool on stream.
func resultOf(t testing.TB, in *Inspector, stream, id, tool string) {
	t.Helper()
	call := messages.ToolCall(stream, id, tool, []byte(`{}`))
	r, err := messages.ToolResult(stream, id, tool, true)
	if err != nil {
		t.Fatal(err)
	}
	in.OnToolResult(toolResult(stream, call, r))
}

// registerTools gives n tools named prefix0… to in.Tools.
func registerTools(t testing.TB, in *Inspector, prefix string, n int) {
	t.Helper()
	var ts []*tools.Tool
	for i := range n {
		ts = append(ts, tools.MustNewTyped(tools.Definition{Name: fmt.Sprintf("%s%d", prefix, i), Description: "no-op", Sync: true},
			func(context.Context, struct{}) (bool, error) { return true, nil }))
	}
	if _, err := in.Tools(ts); err != nil {
		t.Fatal(err)
	}
}

// A long-running host whose agents call many distinct tools (its own,
// given to Tools: no made-up names folded into OtherTools) keeps at
// most MaxToolRows rows of figures: past it, the row used least
// recently goes. A tool called all along keeps its row and its count;
// one dropped and called again starts a row afresh.
func TestTools_RowsBoundedLeastRecentlyUsedDropped(t *testing.T) {
	in, o := newObserved(t)
	const distinct = 3 * MaxToolRows
	registerTools(t, in, "tool_", distinct)
	registerTools(t, in, "kept", 1)
	// The adapter's observer remembers the row of tool_0, which goes.
	call := messages.ToolCall("s", "c0", "tool_0", []byte(`{}`))
	requestTurn(o, "s", call, messages.End("s"))
	resultOf(t, in, "s", "c0", "tool_0")
	for i := range distinct {
		resultOf(t, in, "s", fmt.Sprintf("c%d", i), fmt.Sprintf("tool_%d", i))
		resultOf(t, in, "s", fmt.Sprintf("k%d", i), "kept0")
	}
	rows := map[string]ToolFigures{}
	for _, tf := range in.Snapshot("").Tools {
		rows[tf.Name] = tf
	}
	if len(rows) > MaxToolRows {
		t.Fatalf("%d rows of tool figures after %d distinct tools, want at most %d", len(rows), distinct+1, MaxToolRows)
	}
	if k := rows["kept0"]; k.Calls != distinct {
		t.Fatalf("kept0 (called all along) %+v, want its %d calls kept", k, distinct)
	}
	newest := fmt.Sprintf("tool_%d", distinct-1)
	if rows[newest].Calls != 1 {
		t.Fatalf("%s (the newest) not shown with its call: %+v", newest, rows[newest])
	}
	if _, ok := rows["tool_1"]; ok {
		t.Fatalf("tool_1, used least recently, still shown past the bound")
	}
	in.lock()
	n, listed := len(in.tools), len(in.toolList)
	in.mu.Unlock()
	if n > MaxToolRows || listed > MaxToolRows {
		t.Fatalf("%d rows indexed, %d listed, want at most %d", n, listed, MaxToolRows)
	}
	// tool_0's row went: the observer's call of it counts in a new one.
	call = messages.ToolCall("s", "again", "tool_0", []byte(`{}`))
	requestTurn(o, "s", call, messages.End("s"))
	resultOf(t, in, "s", "again", "tool_0")
	got := ToolFigures{}
	for _, tf := range in.Snapshot("").Tools {
		if tf.Name == "tool_0" {
			got = tf
		}
	}
	if got.Calls != 1 || got.Timed != 1 {
		t.Fatalf("tool_0 called again after its row went: %+v, want a new row with 1 call, timed", got)
	}
}

// Calls of one tool whose names are equal strings, not the same one
// (decoded anew each time), count in one row, which the adapter's
// observer remembers once.
func TestTools_EqualNamesOneRow(t *testing.T) {
	in, o := newObserved(t)
	for i := range 3 {
		id := fmt.Sprintf("c%d", i)
		name := strings.Clone("echo")
		call := messages.ToolCall("s", id, name, []byte(`{}`))
		requestTurn(o, "s", call, messages.End("s"))
		resultOf(t, in, "s", id, strings.Clone("echo"))
	}
	if st := in.Snapshot("").Tools; len(st) != 1 || st[0].Calls != 3 || st[0].Timed != 3 {
		t.Fatalf("tools %+v, want echo alone with 3 calls, timed", st)
	}
	if len(o.tools) != 1 {
		t.Fatalf("the observer remembers %d rows, want 1", len(o.tools))
	}
}
