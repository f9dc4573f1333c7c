package remote_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/remote"
)

// envHeldReader: serve a node whose reader of a tool's results is held
// (see runHeldReader), close it with a ctx that has ended, and print
// "close ERR", then, once the reader is let go, the goroutines left.
const envHeldReader = "POLYWEAVE_REMOTE_TEST_HELD_READER"

func runHeldReader(string) int {
	n, err := remote.Serve(&remote.NodeOptions{Address: "127.0.0.1:0", Tools: nodeTools(func(string) {})})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	release := remote.HoldReader(n)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	fmt.Println("close", oneLine(n.Close(ctx)))
	release()
	printLeaks()
	return 0
}

// A node's Close whose ctx ends while a reader of a tool's results has
// not returned (its tool has not stopped) returns with ctx's error, naming
// it; the rest of the stop goes on once the reader has returned, and
// leaves nothing running.
func TestNodeClose_HeldReaderReturnsAtCtxEnd(t *testing.T) {
	t.Parallel()
	p := startChild(t, envHeldReader+"=1")
	if e := p.next(t); !strings.HasPrefix(e, "close ") || !strings.Contains(e, "results") || !strings.HasSuffix(e, context.Canceled.Error()) {
		t.Errorf("%s; want ctx's error, naming the results still read", e)
	}
	p.want(t, "leaks none", "%s; want the stop to end once the reader has")
}
