package remote_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/remote"
)

// envRedial: run a client of the node at this address whose clock only
// moves when the test says so (see runRedial).
const envRedial = "POLYWEAVE_REMOTE_TEST_REDIAL"

// runRedial runs a client of the node at addr, with default options and a
// clock that stands still, and obeys the lines on stdin:
//
//   - "call": ask the node for its tools; print "tools ERR" (<nil> on
//     success).
//   - "advance D": move the clock on by the duration D; print "advanced".
//   - "gone N": wait until the node has been reported gone N times in
//     all; print "gone N".
//   - "count": once the client's actor has handled all it was sent, print
//     "gone N dials M": the node's reports so far, and the connections
//     the client began to open to it. The count is exact once the calls
//     before it are answered: a call that dials is answered only after
//     its dial began (by the connection's answer, or by its failure to
//     open, which the interceptor reports after it counted the dial), and
//     a call answered at once does not dial.
//
// When stdin closes it closes the client and prints "close ERR", then the
// goroutines left ("leaks none" when none).
func runRedial(addr string) int {
	var gone atomic.Int64
	reported := make(chan struct{}, 64)
	c, err := remote.NewClient(&remote.ClientOptions{OnNodeGone: func(a string) {
		if a == addr {
			gone.Add(1)
		}
		select {
		case reported <- struct{}{}:
		default:
		}
	}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var offset atomic.Int64
	base := time.Now()
	remote.SetClock(c, func() time.Time { return base.Add(time.Duration(offset.Load())) })
	opening := remote.Opening(c)
	dials := 0
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		cmd, arg, _ := strings.Cut(sc.Text(), " ")
		switch cmd {
		case "call":
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, err := c.Tools(ctx, addr)
			cancel()
			fmt.Println("tools", err)
		case "advance":
			d, err := time.ParseDuration(arg)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			offset.Add(int64(d))
			fmt.Println("advanced")
		case "gone":
			want, err := strconv.ParseInt(arg, 10, 64)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			deadline := time.After(30 * time.Second)
		wait:
			for gone.Load() < want {
				select {
				case <-reported:
				case <-deadline:
					break wait
				}
			}
			fmt.Println("gone", gone.Load())
		case "count":
			if err := remote.Settle(c); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			for len(opening) > 0 {
				if <-opening == addr {
					dials++
				}
			}
			fmt.Println("gone", gone.Load(), "dials", dials)
		}
	}
	fmt.Println("close", oneLine(c.Close(context.Background())))
	printLeaks()
	return 0
}

// redialClient is a client process of runRedial.
type redialClient struct {
	t *testing.T
	p *nodeProc
}

// do sends the client the line cmd and checks that it answers want.
func (c redialClient) do(cmd, want string) {
	c.t.Helper()
	if _, err := fmt.Fprintln(c.p.stdin, cmd); err != nil {
		c.t.Fatal(err)
	}
	if got := c.p.next(c.t); got != want {
		c.t.Errorf("%s: client said %q, want %q", cmd, got, want)
	}
}

// A node that is gone is reported once for each going, however often it
// is called afterwards; a node whose connections fail to open is dialled
// again only after a backoff that grows with each failure (calls in the
// meantime are answered at once with ErrNodeUnreachable, without a dial),
// and a node that comes back at the same address serves again once the
// backoff has passed. A node whose open connection ends is dialled again
// at the next call.
func TestClient_RedialBackoff(t *testing.T) {
	t.Parallel()
	node := startNode(t, remote.DefaultAddress)
	addr := node.addr
	c := redialClient{t, startChild(t, envRedial+"="+addr)}
	unreachable := "tools remote: describe tools of " + addr + ": "
	// unreachableNow checks a call answered with ErrNodeUnreachable.
	unreachableNow := func() {
		t.Helper()
		if _, err := fmt.Fprintln(c.p.stdin, "call"); err != nil {
			t.Fatal(err)
		}
		got := c.p.next(t)
		if !strings.HasPrefix(got, unreachable) || !strings.HasSuffix(got, remote.ErrNodeUnreachable.Error()) {
			t.Errorf("call: client said %q, want ErrNodeUnreachable", got)
		}
	}

	c.do("call", "tools <nil>")
	c.do("count", "gone 0 dials 1")

	node.kill()
	c.do("gone 1", "gone 1")
	unreachableNow() // dialled at once: the connection had opened
	unreachableNow() // backed off: not dialled
	unreachableNow()
	c.do("count", "gone 1 dials 2")

	c.do("advance "+remote.DefaultRedialBackoff.String(), "advanced")
	unreachableNow() // dialled again, and failed: the backoff doubles
	c.do("advance "+remote.DefaultRedialBackoff.String(), "advanced")
	unreachableNow()
	c.do("count", "gone 1 dials 3")

	node = startNode(t, addr)
	unreachableNow() // back, but the backoff has not passed
	c.do("count", "gone 1 dials 3")
	c.do("advance "+remote.DefaultRedialBackoff.String(), "advanced")
	c.do("call", "tools <nil>")
	c.do("call", "tools <nil>")
	c.do("count", "gone 1 dials 4")

	node.kill()
	c.do("gone 2", "gone 2")
	unreachableNow() // dialled at once again: the connection had opened
	c.do("count", "gone 2 dials 5")

	_ = c.p.stdin.Close()
	if e := c.p.next(t); e != "close <nil>" {
		t.Error(e)
	}
	if e := c.p.next(t); e != "leaks none" {
		t.Error(e)
	}
}
