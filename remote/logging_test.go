package remote_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/internal/syncbuf"
	"github.com/polyweave/polyweave-go/remote"
)

// envDialLog: run a client that fails to reach a dead address, logging
// to a recorder (see runDialLog).
const envDialLog = "POLYWEAVE_REMOTE_TEST_DIAL_LOG"

// runDialLog runs a client, logging to a recorder, that asks an address
// where nothing listens for its tools twice (with no redial backoff, so
// that both dial), then closes. It prints "records", then each record at
// INFO or above, one a line (as slog's text handler writes it), then
// "end".
func runDialLog() int {
	dead, err := deadAddress()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var logs syncbuf.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := remote.NewClient(&remote.ClientOptions{Logger: logger, RedialBackoff: -1})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := c.Tools(ctx, dead)
		cancel()
		if err == nil {
			fmt.Fprintln(os.Stderr, "a dead address described its tools")
			return 1
		}
	}
	if err := c.Close(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("records")
	for _, r := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if !strings.Contains(r, " level=DEBUG ") {
			fmt.Println(r)
		}
	}
	fmt.Println("end")
	return 0
}

// A failed dial writes nothing at INFO or above to the client's logger:
// protoactor's own records of its connections are lowered to DEBUG, as a
// runtime's are. What is left is the client's own record of the node's
// going, once.
func TestClient_FailedDialLogsQuietly(t *testing.T) {
	t.Parallel()
	p := startChild(t, envDialLog+"=1")
	if e := p.next(t); e != "records" {
		t.Fatalf("client said %q", e)
	}
	var got []string
	for e := p.next(t); e != "end"; e = p.next(t) {
		got = append(got, e)
	}
	if len(got) != 1 || !strings.Contains(got[0], ` level=INFO msg="tool node gone" `) {
		t.Errorf("records at INFO and above:\n%s\nwant only the node's going, once", strings.Join(got, "\n"))
	}
}
