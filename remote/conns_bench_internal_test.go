package remote

import (
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"
)

// framedConn is a net.Conn whose peer sends the client's preface, then
// block over and over.
type framedConn struct {
	net.Conn
	head, block []byte
	at          int
}

// SetReadDeadline is never reached: the peer's messages are whole long
// before the held-message timeout.
func (c *framedConn) SetReadDeadline(time.Time) error { return nil }

func (c *framedConn) Read(p []byte) (int, error) {
	if len(c.head) > 0 {
		n := copy(p, c.head)
		c.head = c.head[n:]
		return n, nil
	}
	n := copy(p, c.block[c.at:])
	c.at = (c.at + n) % len(c.block)
	return n, nil
}

// messageFrames are the DATA frames (of HTTP/2's default size) of one
// gRPC message of size bytes on stream 1.
func messageFrames(size int) []byte {
	msg := make([]byte, grpcPrefix+size)
	binary.BigEndian.PutUint32(msg[1:], uint32(size))
	var out []byte
	for len(msg) > 0 {
		n := min(len(msg), http2MaxFrame)
		f := make([]byte, http2FrameHeader, http2FrameHeader+n)
		putFrameHeader(f, n, frameData, 0, 1)
		out = append(out, append(f, msg[:n]...)...)
		msg = msg[n:]
	}
	return out
}

// benchmarkRead reads b.N messages of size bytes as gRPC would (32 KiB
// at a time), through a heldConn or not.
func benchmarkRead(b *testing.B, size int, held bool) {
	block := messageFrames(size)
	raw := &framedConn{head: []byte(clientPreface), block: block}
	var conn net.Conn = raw
	if held {
		conn = newHeldConn(raw, newConnLimits(slog.New(slog.DiscardHandler), 0, 0), "peer")
	}
	buf := make([]byte, 32<<10)
	if _, err := io.ReadFull(conn, buf[:len(clientPreface)]); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(block)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for left := len(block); left > 0; {
			n, err := conn.Read(buf[:min(len(buf), left)])
			if err != nil {
				b.Fatal(err)
			}
			left -= n
		}
	}
}

func BenchmarkConnRead(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"1KiB", 1 << 10}, {"1MiB", 1 << 20}, {"16MiB", 16 << 20}} {
		b.Run(size.name+"/direct", func(b *testing.B) { benchmarkRead(b, size.n, false) })
		b.Run(size.name+"/held", func(b *testing.B) { benchmarkRead(b, size.n, true) })
	}
}
