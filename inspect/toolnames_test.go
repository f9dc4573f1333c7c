package inspect_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/inspect"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// TestTools_MadeUpNamesAreBounded: the names of tool calls are the
// model's, and a model (confused, or steered by what it read) may call
// any number of tools that do not exist, each answered unknown_tool. The
// inspector bounds everything else it keeps (sessions, feed, ended
// actors); the per-tool figures must not grow by one row, kept for good
// and drawn in every event of every page, per name the model made up.
func TestTools_MadeUpNamesAreBounded(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	in, err := inspect.New(rt, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	const made = 5000
	for i := range made {
		name := fmt.Sprintf("no_such_tool_%d", i)
		call := messages.ToolCall("s", fmt.Sprintf("c%d", i), name, []byte(`{}`))
		res := messages.ToolError("s", call.GetToolCallId(), name, "Unknown tool: "+name)
		res.Meta.FailureKind = string(tools.FailureUnknownTool)
		in.OnToolResult(tools.ToolResultEvent{StreamID: "s", Iteration: 1, Call: call, Result: res})
	}
	if n := len(in.Snapshot("").Tools); n > inspect.DefaultMaxSessions {
		t.Fatalf("%d calls of %d made-up tool names keep %d rows of tool figures (for good: nothing forgets them)", made, made, n)
	}
}

// TestSnapshot_ModelMadeStringsAreClipped: a tool call's name and id are
// the model's, of any length; like its arguments and messages they are
// clipped in what the page shows (the feed, the tool figures), so that
// one call with a megabyte name does not put a megabyte into every
// event of every page, for as long as the feed keeps it.
func TestSnapshot_ModelMadeStringsAreClipped(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	in, err := inspect.New(rt, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	name, id := strings.Repeat("n", 1<<20), strings.Repeat("i", 1<<20)
	call := messages.ToolCall("s", id, name, []byte(`{}`))
	res := messages.ToolError("s", id, name, "Unknown tool")
	res.Meta.FailureKind = string(tools.FailureUnknownTool)
	in.OnToolResult(tools.ToolResultEvent{StreamID: "s", Iteration: 1, Call: call, Result: res})
	data, err := json.Marshal(in.Snapshot("s"))
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 64<<10 {
		t.Fatalf("one call with a 1 MiB name and a 1 MiB id makes a snapshot of %d bytes (Clip is %d)", len(data), inspect.DefaultClip)
	}
}

// TestTools_HostsToolsKeepTheirRows: a tool the host gave to
// Inspector.Tools keeps a row of its own however many names the model
// made up before its first call; the made-up names past the bound are
// counted together, in the OtherTools row.
func TestTools_HostsToolsKeepTheirRows(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	in, err := inspect.New(rt, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	echo := tools.MustNewTyped(tools.Definition{Name: "echo"},
		func(_ context.Context, in echoIn) (echoOut, error) { return echoOut(in), nil })
	if _, err := in.Tools([]*tools.Tool{echo}); err != nil {
		t.Fatal(err)
	}
	result := func(name, id string) {
		call := messages.ToolCall("s", id, name, []byte(`{}`))
		res := messages.ToolError("s", id, name, "Unknown tool: "+name)
		res.Meta.FailureKind = string(tools.FailureUnknownTool)
		in.OnToolResult(tools.ToolResultEvent{StreamID: "s", Iteration: 1, Call: call, Result: res})
	}
	const made = 200
	for i := range made {
		result(fmt.Sprintf("no_such_tool_%d", i), fmt.Sprintf("c%d", i))
	}
	result("echo", "e1")
	calls := map[string]int{}
	total := 0
	for _, tf := range in.Snapshot("").Tools {
		calls[tf.Name] = tf.Calls
		total += tf.Calls
	}
	if calls["echo"] != 1 || calls[inspect.OtherTools] == 0 || total != made+1 {
		t.Fatalf("echo %d calls, %s %d, %d in all over %d rows; want echo's own row with 1, the rest counted, %d in all",
			calls["echo"], inspect.OtherTools, calls[inspect.OtherTools], total, len(calls), made+1)
	}
}

// TestTools_FailureKindsAreBoundedAndClipped: a result's failure kind is
// a string of its meta, which a remote tool (or one answering with a
// ResultError) sets as it likes: a tool's kinds are clipped like the
// model's names, and counted in a bounded number of rows, the kinds past
// the bound together in OtherKinds.
func TestTools_FailureKindsAreBoundedAndClipped(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	in, err := inspect.New(rt, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	const made = 5000
	for i := range made {
		call := messages.ToolCall("s", fmt.Sprintf("c%d", i), "remote", []byte(`{}`))
		res := messages.ToolError("s", call.GetToolCallId(), "remote", "failed")
		res.Meta.FailureKind = fmt.Sprintf("kind_%d_%s", i, strings.Repeat("k", 1<<16))
		in.OnToolResult(tools.ToolResultEvent{StreamID: "s", Iteration: 1, Call: call, Result: res})
	}
	snap := in.Snapshot("")
	if len(snap.Tools) != 1 {
		t.Fatalf("%d rows of tool figures, want remote's", len(snap.Tools))
	}
	kinds := snap.Tools[0].Kinds
	total := 0
	for kind, n := range kinds {
		total += n
		if len(kind) > inspect.DefaultClip+32 {
			t.Errorf("a failure kind of %d bytes kept (Clip is %d)", len(kind), inspect.DefaultClip)
			break
		}
	}
	if len(kinds) > 64 || kinds[inspect.OtherKinds] == 0 || total != made {
		t.Errorf("%d failures of %d made-up kinds keep %d kinds, %d in %s, %d counted; want a bounded number, the rest in %s, all counted",
			made, made, len(kinds), kinds[inspect.OtherKinds], inspect.OtherKinds, total, inspect.OtherKinds)
	}
	data, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 64<<10 {
		t.Errorf("failures of made-up kinds make a snapshot of %d bytes", len(data))
	}
}

// TestTools_GivenAfterItsRowWasMade: a tool whose row was made before
// the host gave it to Inspector.Tools (a call of it seen first, or a
// breaker change) is the host's from then on: its row is not counted
// among the names the model made up, which keep their maxOtherTools
// (32) rows of their own.
func TestTools_GivenAfterItsRowWasMade(t *testing.T) {
	for _, faults := range []bool{false, true} {
		rt := actorstest.NewRuntime(t, nil)
		in, err := inspect.New(rt, &inspect.Options{Faults: faults})
		if err != nil {
			t.Fatal(err)
		}
		result := func(name, id string) {
			call := messages.ToolCall("s", id, name, []byte(`{}`))
			res, err := messages.ToolResult("s", id, name, map[string]bool{"ok": true})
			if err != nil {
				t.Fatal(err)
			}
			in.OnToolResult(tools.ToolResultEvent{StreamID: "s", Iteration: 1, Call: call, Result: res})
		}
		result("echo", "e1")
		if tool(in.Snapshot(""), "echo").Calls != 1 { // its row shown
			t.Fatal("echo's call not shown")
		}
		echo := tools.MustNewTyped(tools.Definition{Name: "echo"},
			func(_ context.Context, in echoIn) (echoOut, error) { return echoOut(in), nil })
		if _, err := in.Tools([]*tools.Tool{echo}); err != nil {
			t.Fatal(err)
		}
		for i := range 40 {
			result(fmt.Sprintf("no_such_tool_%d", i), fmt.Sprintf("c%d", i))
		}
		madeUp := 0
		for _, tf := range in.Snapshot("").Tools {
			if strings.HasPrefix(tf.Name, "no_such_tool_") {
				madeUp++
			}
		}
		in.Close()
		if madeUp != 32 {
			t.Errorf("Faults %v: %d rows of made-up names after echo was given to Tools, want 32 (echo is the host's)", faults, madeUp)
		}
	}
}
