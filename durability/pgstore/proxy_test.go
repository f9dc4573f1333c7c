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
	"strings"
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
	// holdAfterFirst forwards the transaction and the server's answer to
	// its first statement, then swallows what the server says and the
	// client's Terminate; when the client's end of the connection closes
	// (or proxy.cut closes it), the server's end stays open, so that the
	// server backend lives on after its transaction, as behind a network
	// that lost the client.
	holdAfterFirst
	// holdCommit acts on the first COMMIT (a simple query) instead of an
	// Execute: it holds that message and every later one from the client
	// until proxy.release, keeping the server's end open when the
	// client's closes.
	holdCommit
	// holdAfterFlush forwards the transaction up to the first Flush (the
	// first statement of a write's pipeline, see runPipelined) and the
	// server's answers, and swallows every later message from the client;
	// the server's end stays open when the client's closes, so that the
	// transaction stays open on the server, its id assigned and nothing
	// of it written.
	holdAfterFlush
	// holdRequest is holdCommit acting on the transaction's first
	// Execute: the server gets its transaction only at proxy.release.
	holdRequest
)

// holds reports whether f keeps the server's end of its connection open
// when the client's closes (see link).
func (f fault) holds() bool {
	return f == holdAfterFirst || f == holdCommit || f == holdAfterFlush || f == holdRequest
}

// proxy is a TCP proxy to the test server that can fail one connection
// as a fault says, to make what a network or a server does to a write in
// flight happen at a known point of the protocol.
type proxy struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	armed    fault         // for the next connection that sends an Execute
	hit      chan struct{} // closed when the armed fault has acted
	faulted  *link         // the connection that suffered the armed fault
	refusing bool          // new connections are closed at once
	stalled  chan struct{} // new connections wait until it is closed
	noCancel bool          // cancel requests are swallowed
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
}

// link is one connection relayed by the proxy.
type link struct {
	client, server net.Conn

	mu         sync.Mutex
	active     fault // the fault this connection suffers, once it applies
	hit        chan struct{}
	passed     bool     // holdAfterFirst: the first statement's answer went through; holdAfterFlush: the Flush went through
	held       [][]byte // holdCommit: the client's messages held
	released   bool     // holdCommit: the held messages were sent on
	clientGone bool
}

func (l *link) state() (fault, chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.active, l.hit
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

// take applies the armed fault to l when the client message typ (with
// its text, for a simple query) is the one it acts on, disarming the
// proxy, and returns l's fault.
func (p *proxy) take(l *link, typ byte, msg []byte) (fault, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.armed
	switch {
	case f == 0:
		return l.state()
	case f == holdCommit && typ == 'Q' && len(msg) > 11 && strings.EqualFold(string(msg[5:11]), "commit"):
	case f != holdCommit && typ == 'E':
	default:
		return l.state()
	}
	p.armed, p.faulted = 0, l
	l.mu.Lock()
	defer l.mu.Unlock()
	l.active, l.hit = f, p.hit
	return l.active, l.hit
}

// refuse makes the proxy close every new connection at once (the server
// unreachable) while on is true.
func (p *proxy) refuse(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refusing = on
}

// stall makes new connections wait, connected to neither the client nor
// the server, while on is true (a server that does not answer yet).
func (p *proxy) stall(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case on && p.stalled == nil:
		p.stalled = make(chan struct{})
	case !on && p.stalled != nil:
		close(p.stalled)
		p.stalled = nil
	}
}

// dropCancels makes the proxy swallow cancel requests (they never reach
// the server), as a network that lost the server would.
func (p *proxy) dropCancels() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.noCancel = true
}

// cut closes the client's end of the connection that suffered the armed
// fault (holdAfterFirst): the client sees its connection lost, while
// the server backend goes on.
func (p *proxy) cut() {
	p.mu.Lock()
	l := p.faulted
	p.mu.Unlock()
	l.client.Close()
}

// release sends the messages a holdCommit (or holdRequest) fault held on to the server;
// when the client is gone, the server then reads the end of the stream.
func (p *proxy) release() {
	p.mu.Lock()
	l := p.faulted
	p.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.held {
		l.server.Write(m)
	}
	l.held, l.released = nil, true
	if l.clientGone {
		l.server.(*net.TCPConn).CloseWrite()
	}
}

func (p *proxy) stop() {
	p.ln.Close()
	p.stall(false)
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
		p.mu.Lock()
		refusing, stalled := p.refusing, p.stalled
		p.mu.Unlock()
		if refusing {
			client.Close()
			continue
		}
		p.track(client)
		p.wg.Go(func() {
			if stalled != nil {
				<-stalled
			}
			server, err := net.Dial("tcp", p.target)
			if err != nil {
				p.mu.Lock()
				delete(p.conns, client)
				p.mu.Unlock()
				client.Close()
				return
			}
			p.track(server)
			p.serve(client, server)
		})
	}
}

// serve relays one connection, message by message, until either side
// ends it, applying a fault when its transaction starts. When the client
// ends it under a fault that holds (see fault.holds), the server's end
// stays open until the server ends it or the proxy stops.
func (p *proxy) serve(client, server net.Conn) {
	defer func() {
		p.mu.Lock()
		delete(p.conns, client)
		delete(p.conns, server)
		p.mu.Unlock()
	}()
	l := &link{client: client, server: server}
	fromServer, fromClient := make(chan struct{}), make(chan struct{})
	go func() { // server to client
		defer close(fromServer)
		r := bufio.NewReader(server)
		for {
			typ, msg, err := readMessage(r, true)
			if err != nil {
				return
			}
			f, h := l.state()
			switch f {
			case 0, holdCommit, holdAfterFlush, holdRequest:
				if _, err := client.Write(msg); err != nil && !f.holds() {
					return
				}
			case muteReply, cutAfterReply:
				if typ == 'Z' { // ReadyForQuery: the transaction is over
					closeOnce(h)
					if f == cutAfterReply {
						return
					}
				}
			case holdAfterFirst:
				l.mu.Lock()
				pass := !l.passed
				if typ == 'C' { // CommandComplete: the first statement's answer is whole
					l.passed = true
				}
				l.mu.Unlock()
				if pass {
					client.Write(msg)
					if typ == 'C' {
						closeOnce(h)
					}
				}
			}
		}
	}()
	go func() { // client to server
		defer close(fromClient)
		r := bufio.NewReader(client)
		first := true
		for {
			typ, msg, err := readMessage(r, !first)
			if err != nil {
				return
			}
			if first && p.swallowCancel(msg) {
				return
			}
			first = false
			f, h := l.state()
			if f == 0 {
				f, h = p.take(l, typ, msg)
			}
			if f == holdAfterFirst && typ == 'X' { // Terminate: lost with the client
				continue
			}
			if f == holdAfterFlush {
				l.mu.Lock()
				pass := !l.passed
				l.passed = l.passed || typ == 'H'
				l.mu.Unlock()
				if pass {
					if _, err := server.Write(msg); err != nil {
						return
					}
					if typ == 'H' {
						closeOnce(h)
					}
				}
				continue
			}
			switch f {
			case 0, muteReply, cutAfterReply, holdAfterFirst:
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
			case holdCommit, holdRequest:
				l.mu.Lock()
				if l.released {
					l.mu.Unlock()
					if _, err := server.Write(msg); err != nil {
						return
					}
					continue
				}
				l.held = append(l.held, msg)
				l.mu.Unlock()
				closeOnce(h)
			}
		}
	}()
	select {
	case <-fromServer: // the server ended it: end the client's end
		client.Close()
		server.Close()
		<-fromClient
	case <-fromClient:
		client.Close()
		l.mu.Lock()
		l.clientGone = true
		held := l.active == holdCommit || l.active == holdRequest
		switch {
		case l.active == holdAfterFirst, l.active == holdAfterFlush, held && !l.released:
			// The server's end stays open: its backend lives on.
		case held:
			server.(*net.TCPConn).CloseWrite() // the server reads what was released, then the end
		default:
			server.Close()
		}
		l.mu.Unlock()
		<-fromServer
		server.Close()
	}
}

// swallowCancel reports whether msg, the first message of a connection,
// is a cancel request that the proxy swallows (see dropCancels).
func (p *proxy) swallowCancel(msg []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.noCancel && len(msg) == 16 && binary.BigEndian.Uint32(msg[4:8]) == 80877102
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
