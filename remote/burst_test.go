package remote_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/remote"
)

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
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := map[string]int{}
	for range calls {
		wg.Go(func() {
			if _, err := handler(ctx, json.RawMessage(`{"text":"`+text+`"}`)); err != nil {
				mu.Lock()
				failed[err.Error()]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
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
