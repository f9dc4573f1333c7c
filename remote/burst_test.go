package remote_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/remote"
	"github.com/polyweave/polyweave-go/tools"
)

// callsAtOnce makes calls calls of handler with args at once, and
// counts by their errors (at most 300 bytes of each) those whose result
// is not ok.
func callsAtOnce(ctx context.Context, handler tools.HandlerFunc, calls int, args json.RawMessage, ok func(error) bool) map[string]int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := map[string]int{}
	for range calls {
		wg.Go(func() {
			if _, err := handler(ctx, args); !ok(err) {
				mu.Lock()
				failed[fmt.Sprintf("%.300v", err)]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return failed
}

// TestClient_BurstOfModerateCalls: 250 calls at once, each with 32 KiB
// of arguments, to one living node: none is answered ErrNodeUnreachable,
// and the node is not reported gone. (Protoactor batches what it has
// queued for a peer into one gRPC message: 8 MB of calls is over gRPC's
// default limit of 4 MiB a message, which ends the connection, unless
// batches are bounded to what the receiver takes.)
func TestClient_BurstOfModerateCalls(t *testing.T) {
	const calls, size = 250, 32 << 10
	client, _ := setup(t)
	node := startNode(t, remote.DefaultAddress)
	ts := remoteTools(t, client, node.addr)
	ran := make(chan int, 1)
	go func() { // the node prints one event per echo it runs: count them
		n := 0
		for e := range node.events {
			if strings.HasPrefix(e, "echo ") {
				n++
			}
		}
		ran <- n
	}()
	handler := ts["echo"].Definition().Handler
	text := strings.Repeat("y", size)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	failed := callsAtOnce(ctx, handler, calls, json.RawMessage(`{"text":"`+text+`"}`), func(err error) bool { return err == nil })
	if len(failed) > 0 {
		t.Errorf("of %d calls of %d bytes to a living node, failed: %v", calls, size, failed)
	}
	select {
	case addr := <-client.gone:
		t.Errorf("node %s reported gone during the burst; it is alive", addr)
	default:
	}
	node.stop()
	t.Logf("the node ran %d echo calls", <-ran)
}
