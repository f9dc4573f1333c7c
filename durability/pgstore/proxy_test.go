package pgstore_test

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
)

// A fault is what a proxy does to the first connection that sends an
// Execute message after it was armed: the first statement of a write's
// transaction (reads, pings and statement preparation send none before
// their own Execute, so a test arms the proxy just before the write).
type fault int

const (
	// muteReply forwards the transaction to the server and swallows
	// everything the server says from then on: the write commits and the
	// client hears nothing, as behind a network black hole for replies.
	muteReply fault = iota + 1
	// dropRequest swallows the transaction and every later byte both
	// ways: the server never sees it, and the client hears nothing.
	dropRequest
	// cutAfterReply is muteReply, and the connection is closed once the
	// server has answered the transaction (it committed): the reply is
	// lost with the connection.
	cutAfterReply
	// cutRequest swallows the transaction and closes the connection once
	// it was sent whole: it never reached the server.
	cutRequest
)

// proxy is a TCP proxy to the test server that can fail one connection
// as a fault says, to make what a network or a server does to a write in
// flight happen at a known point of the protocol.
type proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	armed fault         // for the next connection that sends an Execute
	hit   chan struct{} // closed when the armed fault has acted
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// startProxy starts a proxy to the server of dsn and returns it with the
// DSN that connects through it; it is stopped when the test ends.
func startProxy(t *testing.T, dsn string) (*proxy, string) {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.stop)
	port := ln.Addr().(*net.TCPAddr).Port
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		return p, u.String()
	}
	return p, fmt.Sprintf("%s host=127.0.0.1 port=%d", dsn, port)
}

// arm makes the next connection that sends an Execute suffer f; the
// channel returned is closed once f has acted (the transaction swallowed,
// or the server's answer to it swallowed).
func (p *proxy) arm(f fault) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed, p.hit = f, make(chan struct{})
	return p.hit
}

// take returns the armed fault and its channel, disarming the proxy.
func (p *proxy) take() (fault, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, hit := p.armed, p.hit
	p.armed = 0
	return f, hit
}

func (p *proxy) stop() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// track registers c to be closed by stop.
func (p *proxy) track(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns[c] = struct{}{}
}

func (p *proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.track(client)
		p.track(server)
		p.wg.Go(func() { p.serve(client, server) })
	}
}

// serve relays one connection, message by message, until either side
// ends it, applying a fault when its transaction starts.
func (p *proxy) serve(client, server net.Conn) {
	defer func() {
		p.mu.Lock()
		delete(p.conns, client)
		delete(p.conns, server)
		p.mu.Unlock()
	}()
	var (
		mu     sync.Mutex
		active fault // the fault this connection suffers, once it applies
		hit    chan struct{}
	)
	state := func() (fault, chan struct{}) {
		mu.Lock()
		defer mu.Unlock()
		return active, hit
	}
	done := make(chan struct{}, 2)
	go func() { // server to client
		defer func() { done <- struct{}{} }()
		r := bufio.NewReader(server)
		for {
			typ, msg, err := readMessage(r, true)
			if err != nil {
				return
			}
			f, h := state()
			switch f {
			case 0:
				if _, err := client.Write(msg); err != nil {
					return
				}
			case muteReply, cutAfterReply:
				if typ == 'Z' { // ReadyForQuery: the transaction is over
					closeOnce(h)
					if f == cutAfterReply {
						return
					}
				}
			}
		}
	}()
	go func() { // client to server
		defer func() { done <- struct{}{} }()
		r := bufio.NewReader(client)
		first := true
		for {
			typ, msg, err := readMessage(r, !first)
			first = false
			if err != nil {
				return
			}
			f, h := state()
			if f == 0 && typ == 'E' {
				if f, h = p.take(); f != 0 {
					mu.Lock()
					active, hit = f, h
					mu.Unlock()
				}
			}
			switch f {
			case 0, muteReply, cutAfterReply:
				if _, err := server.Write(msg); err != nil {
					return
				}
			case dropRequest, cutRequest:
				if typ == 'S' { // Sync: the transaction was sent whole
					closeOnce(h)
					if f == cutRequest {
						return
					}
				}
			}
		}
	}()
	<-done // one side ended: end the other
	client.Close()
	server.Close()
	<-done
}

func closeOnce(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}

// readMessage reads one protocol message whole: a type byte (unless
// typed is false, for the client's startup message) and a length that
// counts itself.
func readMessage(r *bufio.Reader, typed bool) (byte, []byte, error) {
	head := 4
	if typed {
		head = 5
	}
	msg := make([]byte, head)
	if _, err := io.ReadFull(r, msg); err != nil {
		return 0, nil, err
	}
	n := int(binary.BigEndian.Uint32(msg[head-4:]))
	if n < 4 {
		return 0, nil, errors.New("bad message length")
	}
	msg = append(msg, make([]byte, n-4)...)
	if _, err := io.ReadFull(r, msg[head:]); err != nil {
		return 0, nil, err
	}
	var typ byte
	if typed {
		typ = msg[0]
	}
	return typ, msg, nil
}
