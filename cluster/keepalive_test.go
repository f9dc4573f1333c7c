package cluster_test

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// HTTP/2 as a member's gRPC speaks it, as much as the keepalive test
// needs: frames of these types, and the preface a client opens with.
const (
	h2Settings = 0x4
	h2Ping     = 0x6
	h2GoAway   = 0x7
	h2Ack      = 0x1 // the flag of a SETTINGS or PING that acknowledges
	h2Preface  = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
)

// h2Frame is an HTTP/2 frame's type and flags (its payload read and
// dropped).
type h2Frame struct{ typ, flags byte }

// h2Conn reads and writes raw HTTP/2 frames.
type h2Conn struct {
	net.Conn
	r *bufio.Reader
}

func (c h2Conn) write(typ, flags byte, payload []byte) error {
	hdr := make([]byte, 9, 9+len(payload))
	hdr[0], hdr[1], hdr[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	hdr[3], hdr[4] = typ, flags
	_, err := c.Write(append(hdr, payload...))
	return err
}

func (c h2Conn) read() (h2Frame, error) {
	var hdr [9]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		return h2Frame{}, err
	}
	n := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
	if _, err := c.r.Discard(n); err != nil {
		return h2Frame{}, err
	}
	return h2Frame{typ: hdr[3], flags: hdr[4]}, nil
}

// readUntil reads frames until one of type typ with flags, and returns an
// error when a GOAWAY (or the connection's end) comes first.
func (c h2Conn) readUntil(typ, flags byte) error {
	for {
		f, err := c.read()
		switch {
		case err != nil:
			return fmt.Errorf("connection ended: %w", err)
		case f.typ == h2GoAway:
			return errors.New("GOAWAY")
		case f.typ == h2Settings && f.flags&h2Ack == 0:
			if err := c.write(h2Settings, h2Ack, nil); err != nil {
				return err
			}
		}
		if f.typ == typ && f.flags&h2Ack == flags {
			return nil
		}
	}
}

// pingsSeen accepts the member's connection on ln, speaks HTTP/2's
// preface and then nothing, and returns once the member pings the quiet
// connection, or with the error that ends it first (at the latest, its
// deadline: patience after it opened).
func pingsSeen(ln net.Listener, patience time.Duration) error {
	raw, err := ln.Accept()
	if err != nil {
		return err
	}
	defer raw.Close()
	if err := raw.SetDeadline(time.Now().Add(patience)); err != nil {
		return err
	}
	c := h2Conn{raw, bufio.NewReader(raw)}
	preface := make([]byte, len(h2Preface))
	if _, err := io.ReadFull(c.r, preface); err != nil || string(preface) != h2Preface {
		return fmt.Errorf("HTTP/2 preface %q: %v", preface, err)
	}
	if err := c.write(h2Settings, 0, nil); err != nil {
		return err
	}
	return c.readUntil(h2Ping, 0)
}

// pingsAllowed connects to the member's gRPC server at addr and pings it
// count times, every interval, without a call (a stream) running; then it
// returns whether the member hung up on the pings (a GOAWAY, gRPC's
// answer to a peer that pings more often than its policy allows).
func pingsAllowed(addr string, count int, interval time.Duration) error {
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer raw.Close()
	c := h2Conn{raw, bufio.NewReader(raw)}
	if _, err := io.WriteString(c, h2Preface); err != nil {
		return err
	}
	if err := c.write(h2Settings, 0, nil); err != nil {
		return err
	}
	if err := c.readUntil(h2Settings, h2Ack); err != nil {
		return err
	}
	for i := range count {
		if i > 0 {
			time.Sleep(interval) // the pacing of the pings under test, not a wait for actors
		}
		data := binary.BigEndian.AppendUint64(nil, uint64(i))
		if err := c.write(h2Ping, 0, data); err != nil {
			return err
		}
		if err := c.readUntil(h2Ping, h2Ack); err != nil {
			return fmt.Errorf("ping %d of %d: %w", i+1, count, err)
		}
	}
	// A GOAWAY for the last ping would come before the answer to this
	// SETTINGS: the server answers in order.
	if err := c.write(h2Settings, 0, nil); err != nil {
		return err
	}
	if err := c.readUntil(h2Settings, h2Ack); err != nil {
		return fmt.Errorf("after %d pings: %w", count, err)
	}
	return nil
}

// A member's remote pings its quiet connections to peers, so that a peer
// that vanishes without closing them (a network cut, a frozen process) is
// found out, and lets its peers ping it as often: gRPC's default policy
// hangs up on a peer that pings more often than every 5 minutes (the
// fourth ping of pings 5.5 s apart, here). The member is a child process
// (TestClusterHostChild): the test mostly waits for the pings, beside the
// package's other tests.
func TestMember_Keepalive(t *testing.T) {
	parallelLeakCheck(t)
	host := startHostChild(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	allowed := make(chan error, 1)
	go func() { allowed <- pingsAllowed(host.address, 4, 5500*time.Millisecond) }()
	// The member connects to the peer to send it a message; the peer
	// never answers protoactor's handshake, and the connection stays
	// quiet.
	host.Send(t, "stale "+ln.Addr().String()+" nobody")
	if m := host.Mark(t); m != "sent 1" {
		t.Fatalf("member: mark %q, want \"sent 1\"", m)
	}
	// gRPC pings after 10 s at the soonest.
	if err := pingsSeen(ln, time.Minute); err != nil {
		t.Errorf("the member's connection to a quiet peer: %v, want a ping", err)
	}
	if err := <-allowed; err != nil {
		t.Errorf("a peer pinging the member every 5.5 s: %v, want every ping answered", err)
	}
	host.stop(t)
}
