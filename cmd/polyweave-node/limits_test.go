package main

import (
	"bufio"
	"bytes"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// -max-conns-per-peer bounds the connections one peer may have open to
// the node at once: with 1, a second connection is refused with a GOAWAY
// naming the limit. -max-calls-per-caller is taken beside it.
func TestRun_ConnectionAndCallLimits(t *testing.T) {
	whileServing(t, "-max-conns-per-peer 1 -max-calls-per-caller 5", func(addr string) (said []string) {
		for i := range 2 {
			refused, err := pingOrRefusal(addr, byte(i))
			switch {
			case err != nil:
				said = append(said, err.Error())
			case i == 0 && refused != "":
				said = append(said, "first connection refused: "+refused)
			case i == 1 && !strings.Contains(refused, "limit of 1"):
				said = append(said, "second connection: refusal "+refused+", want one naming the limit of 1")
			}
		}
		return said
	})
}

// whileServing runs the command with -root and args and, once it serves,
// check with its address; it fails t with what check says, or when the
// command does not exit 0 on SIGTERM.
func whileServing(t *testing.T, args string, check func(addr string) []string) {
	t.Helper()
	var said []string
	code, errOut := runChild(t, "-root "+t.TempDir()+" "+args, func(cmd *exec.Cmd, out *bufio.Reader) {
		defer func() { _ = cmd.Process.Signal(syscall.SIGTERM) }()
		line, _ := out.ReadString('\n')
		addr, ok := strings.CutPrefix(strings.TrimSpace(line), "polyweave-node listening on ")
		if !ok {
			said = append(said, "node said "+line)
			return
		}
		said = check(addr)
	})
	if code != 0 || len(said) > 0 {
		t.Errorf("exit %d (stderr %q): %q", code, errOut, said)
	}
}

// pingOrRefusal opens an HTTP/2 connection to addr (left open) and pings
// it: it returns "" once the ping is answered, or the debug data of a
// GOAWAY that comes first.
func pingOrRefusal(addr string, id byte) (string, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return "", err
	}
	if err := c.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
		return "", err
	}
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		return "", err
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		return "", err
	}
	if err := fr.WritePing(false, [8]byte{id}); err != nil {
		return "", err
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return "", err
		}
		if p, ok := f.(*http2.PingFrame); ok && p.IsAck() {
			return "", nil
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			return "GOAWAY " + string(g.DebugData()), nil
		}
	}
}

// -held-message-timeout bounds how long the node holds a message not yet
// whole: a peer that sends part of one, and nothing more, has its
// connection closed with a GOAWAY naming the timeout.
func TestRun_HeldMessageTimeout(t *testing.T) {
	whileServing(t, "-held-message-timeout 200ms", func(addr string) []string {
		why, err := partOfAMessage(addr)
		if err != nil {
			return []string{err.Error()}
		}
		if !strings.Contains(why, "not whole within 200ms") {
			return []string{"GOAWAY " + why + ", want one naming the timeout of 200ms"}
		}
		return nil
	})
}

// partOfAMessage opens an HTTP/2 connection to addr, sends on a call's
// stream part of a message and nothing more, and returns the debug data
// of the GOAWAY that comes.
func partOfAMessage(addr string) (string, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	// Only a failing node makes the test wait this long.
	if err := c.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
		return "", err
	}
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		return "", err
	}
	fr := http2.NewFramer(c, c)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/remote.Remoting/Receive"},
		{":authority", addr}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			return "", err
		}
	}
	part := []byte{0, 0, 1, 0, 0} // the prefix of a message of 64 KiB
	part = append(part, make([]byte, 1000)...)
	for _, err := range []error{fr.WriteSettings(),
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true}),
		fr.WriteData(1, false, part)} {
		if err != nil {
			return "", err
		}
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return "", err
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			return string(g.DebugData()), nil
		}
	}
}
