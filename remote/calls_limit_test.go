package remote_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// TestNode_RefusesCallsOverPerCallerLimit: a caller with
// MaxCallsPerCaller calls in flight on a node has one more answered at
// once, with an error of kind unavailable naming the limit (the call
// not run), rather than queued; once one of its calls is answered, the
// next runs. Every call gets exactly one result.
func TestNode_RefusesCallsOverPerCallerLimit(t *testing.T) {
	client, rt := setup(t)
	node := startLimitsNode(t, 0, 0, 2, 0)
	ts := remoteTools(t, client, node.addr)
	conn, err := rt.Start(ts["hold"].Spec())
	if err != nil {
		t.Fatal(err)
	}
	call := func(id string) *messages.Frame {
		return messages.ToolCall("s", id, "hold", json.RawMessage(`{"id":"`+id+`"}`))
	}
	for _, id := range []string{"h1", "h2"} {
		if err := conn.Send(call(id)); err != nil {
			t.Fatal(err)
		}
		if e := node.next(t); e != "started "+id {
			t.Fatalf("node event %q, want %q", e, "started "+id)
		}
	}
	res := result(t, conn, call("h3"))
	if k := tools.KindOf(res); k != tools.FailureUnavailable || !strings.Contains(string(res.GetPayload()), "limit of 2") {
		t.Errorf("the call over the limit answered %s (kind %q), want kind %q naming the limit", res.GetPayload(), k, tools.FailureUnavailable)
	}
	if err := conn.Send(messages.Cancel("s", "h1")); err != nil {
		t.Fatal(err)
	}
	if k := tools.KindOf(await(t, conn, "h1")); k != tools.FailureCancelled {
		t.Errorf("h1 cancelled: kind %q", k)
	}
	if e := node.next(t); e != "cancelled h1" {
		t.Fatalf("node event %q, want %q", e, "cancelled h1")
	}
	// The node forgets h1 as it sends its result: h4 runs.
	if err := conn.Send(call("h4")); err != nil {
		t.Fatal(err)
	}
	for e := node.next(t); e != "started h4"; e = node.next(t) {
		if !strings.HasPrefix(e, "cancelled ") {
			t.Fatalf("node event %q, want %q", e, "started h4")
		}
	}
	for _, id := range []string{"h2", "h4"} {
		if err := conn.Send(messages.Cancel("s", id)); err != nil {
			t.Fatal(err)
		}
		if k := tools.KindOf(await(t, conn, id)); k != tools.FailureCancelled {
			t.Errorf("%s cancelled: kind %q", id, k)
		}
	}
}
