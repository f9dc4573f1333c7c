package inspect_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/inspect"
	"github.com/polyweave/polyweave-go/tools"
)

// TestStall_AfterClose: Close releases the stalled tool calls, and the
// handler may still be mounted (a host's server outlives the inspector
// until it shuts down). A stall asked for after Close, which no later
// Close would release, is refused: a tool without a timeout
// (tools.NoTimeout) would otherwise wait for ever.
func TestStall_AfterClose(t *testing.T) {
	in := closedWithEcho(t)
	text, err := in.Stall("echo", true)
	for _, tf := range in.Snapshot("").Tools {
		if tf.Name == "echo" && tf.Stalled {
			t.Fatalf("after Close, Stall(echo) = %q, %v: echo is stalled, and nothing will release it", text, err)
		}
	}
	if err == nil {
		t.Fatalf("after Close, Stall(echo) = %q, nil; want it refused", text)
	}
}

// TestStall_AfterCloseOverHTTP: the fault endpoint says a stall after
// Close is refused because the inspector is closed (503), not that the
// tool does not exist.
func TestStall_AfterCloseOverHTTP(t *testing.T) {
	in := closedWithEcho(t)
	w := faultPost(in, "http://127.0.0.1:8080", "/api/fault/stall", "tool=echo&on=true", http.Header{"Origin": {"http://127.0.0.1:8080"}})
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "closed") {
		t.Fatalf("stall posted after Close: %d %s, want 503 saying the inspector is closed", w.Code, w.Body)
	}
}

// closedWithEcho is a closed inspector with faults on that knows a tool
// echo without a timeout (tools.NoTimeout): one a stall never left would
// hold for ever.
func closedWithEcho(t *testing.T) *inspect.Inspector {
	t.Helper()
	rt := actorstest.NewRuntime(t, nil)
	in, err := inspect.New(rt, &inspect.Options{Faults: true})
	if err != nil {
		t.Fatal(err)
	}
	echo := tools.MustNewTyped(tools.Definition{Name: "echo", Timeout: tools.NoTimeout},
		func(_ context.Context, in echoIn) (echoOut, error) { return echoOut(in), nil })
	if _, err := in.Tools([]*tools.Tool{echo}); err != nil {
		t.Fatal(err)
	}
	in.Close()
	return in
}
