package remote_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/remote"
)

// Child roles of the test binary (see TestMain), besides the node.
const (
	// envClient: call hold (id "c") on the node at this address, print
	// "calling", then on a line "close" on stdin close the client and
	// print "closed" and the call's error. A test may SIGKILL it instead.
	envClient = "POLYWEAVE_REMOTE_TEST_CLIENT"
	// envCloseRace: race many DESCRIBE requests against Close (see
	// runCloseRace).
	envCloseRace = "POLYWEAVE_REMOTE_TEST_CLOSE_RACE"
)

func runTestClient(addr string) int {
	c, err := remote.NewClient(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ts, err := c.Tools(ctx, addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	done := make(chan error, 1)
	for _, tool := range ts {
		if tool.Name() == "hold" {
			go func() {
				_, err := tool.Definition().Handler(context.Background(), json.RawMessage(`{"id":"c"}`))
				done <- err
			}()
		}
	}
	fmt.Println("calling")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if sc.Text() == "close" {
			fmt.Println("closed", c.Close(context.Background()))
			fmt.Println("call", <-done)
		}
	}
	return 0
}

// runCloseRace starts raceCalls DESCRIBE requests at once to an address
// that accepts TCP but never speaks gRPC (so none is answered), closes the
// client once half of them are on their way, and prints "returned N" once
// every request has returned, or "stuck N" when N have not returned 10 s
// after Close.
func runCloseRace(string) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer ln.Close()
	c, err := remote.NewClient(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	const raceCalls = 2000
	returned := make(chan error, raceCalls)
	gate, half := make(chan struct{}), make(chan struct{})
	var started atomic.Int64
	for range raceCalls {
		go func() {
			<-gate
			if started.Add(1) == raceCalls/2 {
				close(half)
			}
			_, err := c.Tools(context.Background(), ln.Addr().String())
			returned <- err
		}()
	}
	close(gate)
	<-half
	if err := c.Close(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "close:", err)
	}
	deadline := time.After(10 * time.Second)
	for got := 0; got < raceCalls; got++ {
		select {
		case err := <-returned:
			if !errors.Is(err, remote.ErrClosed) {
				fmt.Println("error", err)
			}
		case <-deadline:
			fmt.Println("stuck", raceCalls-got)
			return 0
		}
	}
	fmt.Println("returned", raceCalls)
	return 0
}

// Close answers every call and DESCRIBE with ErrClosed, however it races
// with them: none is left waiting, not even one whose request was still
// on its way to the client's actor when Close stopped it.
func TestClient_CloseAnswersEveryRequest(t *testing.T) {
	p := startChild(t, envCloseRace+"=1")
	for {
		e := p.next(t)
		if e == "returned 2000" {
			break
		}
		t.Error(e)
		if e[:5] == "stuck" {
			break
		}
	}
}

// startCall starts a node and a client process that calls hold on it, and
// waits until the call runs on the node.
func startCall(t *testing.T) (node, client *nodeProc) {
	t.Helper()
	node = startNode(t, remote.DefaultAddress)
	client = startChild(t, envClient+"="+node.addr)
	if e := client.next(t); e != "calling" {
		t.Fatalf("client said %q", e)
	}
	if e := node.next(t); e != "started c" {
		t.Fatalf("node event %q", e)
	}
	return node, client
}

// A client that closes with a call in flight cancels the call on the node:
// the handler's context is cancelled, the work stops.
func TestClient_CloseCancelsCallsOnTheNode(t *testing.T) {
	node, client := startCall(t)
	if _, err := client.stdin.Write([]byte("close\n")); err != nil {
		t.Fatal(err)
	}
	if e := client.next(t); e != "closed <nil>" {
		t.Errorf("client said %q", e)
	}
	if e := client.next(t); e != "call "+remote.ErrClosed.Error() {
		t.Errorf("client said %q, want the call answered with ErrClosed", e)
	}
	if e := node.next(t); e != "cancelled c" {
		t.Errorf("node event %q, want the handler cancelled", e)
	}
	client.stop()
	node.stop()
}

// A client process that dies mid-call (SIGKILL: no CANCEL, no goodbye):
// the node sees its connection go, cancels the call and forgets its route.
func TestNode_CallerKilledCancelsItsCalls(t *testing.T) {
	node, client := startCall(t)
	client.kill()
	if e := node.next(t); e != "cancelled c" {
		t.Fatalf("node event %q, want the handler cancelled", e)
	}
	if _, err := node.stdin.Write([]byte("routes\n")); err != nil {
		t.Fatal(err)
	}
	if e := node.next(t); e != "routes 0" {
		t.Errorf("node: %q after its caller died, want no route left", e)
	}
	node.stop()
}
