package remote

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/messages"
)

// TestNode_SenderlessCallLogClipped: a TOOL_CALL without a sender (a
// peer speaking protoactor's wire by hand can send one) is dropped and
// logged, with the tool name it gives, which may be megabytes long
// (it is not checked against the frame limit: the call is not run),
// clipped. (The service runs in a plain actor system: see
// TestNode_ProbersBoundedPerAddress.)
func TestNode_SenderlessCallLogClipped(t *testing.T) {
	system := actorstest.HostSystem(t)
	logs := &sizedLog{}
	n := &Node{log: slog.New(logs), probers: map[string][]*actor.PID{}, loads: newLoads(0)}
	svc := system.Root.Spawn(actor.PropsFromFunc(n.receive))
	defer system.Root.Stop(svc)
	system.Root.Send(svc, messages.ToolCall("s", "c", strings.Repeat("n", 1<<20), nil))
	if _, err := system.Root.RequestFuture(svc, countProbers{}, 30*time.Second).Result(); err != nil {
		t.Fatal(err)
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	if logs.records != 1 || logs.largest > maxNameInAnswer+len("…") {
		t.Errorf("%d records logged, the largest value %d bytes; want one, the tool name clipped to %d", logs.records, logs.largest, maxNameInAnswer)
	}
}
