package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/remote"
)

// envAdvertising: a test node (nodeTools) serving with AllowRemote on
// every interface (0.0.0.0, on a free port P) with Advertise HOST:P, HOST
// the value, as `polyweave-node -listen 0.0.0.0:P -advertise HOST:P
// -allow-remote` does; it prints "listening ADDR" (its Address) and the
// tools' events, and closes when stdin closes.
const envAdvertising = "POLYWEAVE_REMOTE_ADVERTISING_NODE"

func init() {
	host := os.Getenv(envAdvertising)
	if host == "" {
		return
	}
	os.Exit(runAdvertising(host))
}

func runAdvertising(host string) int {
	l, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	node, err := remote.Serve(&remote.NodeOptions{Address: fmt.Sprint("0.0.0.0:", port), AllowRemote: true,
		Advertise: net.JoinHostPort(host, fmt.Sprint(port)), Tools: nodeTools(func(e string) { fmt.Println(e) })})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("listening " + node.Address())
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = node.Close(context.Background())
	return 0
}

// A node listening on every interface with Advertise names itself by the
// address advertised, which its callers reach it at: its Address is that
// one, and so is the address in its signs of life (without Advertise, it
// names itself [::]:PORT: see TestClient_NodeOnEveryInterface); its tools
// answer there.
func TestServe_Advertise(t *testing.T) {
	client, _ := setup(t)
	node := startChild(t, envAdvertising+"=127.0.0.1")
	said := node.next(t)
	self, ok := strings.CutPrefix(said, "listening ")
	if !ok {
		t.Fatalf("node said %q", said)
	}
	node.addr = withHost(t, self, "127.0.0.1")
	if self != node.addr {
		t.Errorf("node listening on 0.0.0.0 advertising %s: Address %s", node.addr, self)
	}
	ts := remoteTools(t, client, node.addr)
	if out, err := ts["echo"].Definition().Handler(t.Context(), json.RawMessage(`{"text":"there"}`)); err != nil || !strings.Contains(fmt.Sprintf("%s", out), "there") {
		t.Errorf("call of the node at its advertised address: %s, %v", out, err)
	}
	node.want(t, "echo there", "node event %q, want the call run")
	res, err := client.System().Root.RequestFuture(actor.NewPID(node.addr, remote.ServiceName), &actor.Touch{}, 30*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	if who := res.(*actor.Touched).GetWho().GetAddress(); who != node.addr {
		t.Errorf("node advertising %s names itself %s in its sign of life", node.addr, who)
	}
	node.stopSeen(t, client)
}

// Advertise must be a host:port with a host and a port callers can reach.
func TestServe_AdvertiseValidated(t *testing.T) {
	for _, bad := range []string{"127.0.0.1", ":7710", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:port", "::1:7710"} {
		node, err := remote.Serve(&remote.NodeOptions{Advertise: bad, Tools: nodeTools(func(string) {})})
		if err == nil {
			_ = node.Close(context.Background())
			t.Errorf("Advertise %q: served, want an error", bad)
			continue
		}
		if !errors.Is(err, remote.ErrAdvertise) || !strings.Contains(err.Error(), bad) {
			t.Errorf("Advertise %q: %v, want ErrAdvertise naming the value", bad, err)
		}
	}
}
