package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/mcp"
)

// sessionServer serves boundAnswer over streamable HTTP, giving each
// initialize a session of its own ("s1", "s2", ...). It holds the pings
// of the sessions silent names (until the client gives them up), and
// answers each DELETE with del, after noting its session in deleted.
type sessionServer struct {
	mu      sync.Mutex
	n       int
	deleted map[string]bool
}

func newSessionServer(t *testing.T, silent string, del http.HandlerFunc) (*sessionServer, string) {
	ss := &sessionServer{deleted: map[string]bool{}}
	srv := postServer(t, func(w http.ResponseWriter, r *http.Request) {
		ss.mu.Lock()
		ss.deleted[r.Header.Get("Mcp-Session-Id")] = true
		ss.mu.Unlock()
		del(w, r)
	}, func(w http.ResponseWriter, r *http.Request, body []byte) {
		var req struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &req)
		switch {
		case req.Method == "initialize":
			ss.mu.Lock()
			ss.n++
			w.Header().Set("Mcp-Session-Id", fmt.Sprint("s", ss.n))
			ss.mu.Unlock()
		case req.Method == "ping" && r.Header.Get("Mcp-Session-Id") == silent:
			<-r.Context().Done()
			return
		}
		writeBound(w, body)
	})
	return ss, srv.URL
}

// importAndClose imports the server at url (ss's, with user info or a
// query maybe), closes the import, checks that the DELETE of its session
// was sent by then, and returns Close's error.
func (ss *sessionServer) importAndClose(t *testing.T, url string) error {
	t.Helper()
	rt := actorstest.NewRuntime(t, nil)
	im, err := mcp.Import(context.Background(), rt, &mcp.ImportOptions{URL: url, KeepAlive: -1})
	if err != nil {
		t.Fatal(err)
	}
	err = im.Close(context.Background())
	if !ss.wasDeleted("s1") {
		t.Fatal("Close returned before the session's DELETE was sent")
	}
	return err
}

func (ss *sessionServer) wasDeleted(session string) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.deleted[session]
}

// TestImport_CloseEndsTheSessionOfAReconnectInFlight: the keepalive finds
// the first session silent and the connection is made again; Close comes
// while that reconnection has its session but has not yet made it known.
// Close must not return before that session has ended too (its DELETE
// sent): a session left to end after Close returned outlives the import,
// and the error of its DELETE is nobody's.
func TestImport_CloseEndsTheSessionOfAReconnectInFlight(t *testing.T) {
	ss, url := newSessionServer(t, "s1", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	inWindow := make(chan struct{})
	closeReturned := make(chan struct{})
	teardownWaits := make(chan struct{})
	var attempts atomic.Int32
	o := &mcp.ImportOptions{URL: url, KeepAlive: 100 * time.Millisecond, KeepAliveMisses: 1}
	mcp.WithHooks(o, func() {
		if attempts.Add(1) != 2 {
			return
		}
		close(inWindow)
		select { // held until the teardown is past the point where it could miss the session
		case <-closeReturned:
		case <-teardownWaits:
		}
	}, func() { close(teardownWaits) })
	rt := actorstest.NewRuntime(t, nil)
	im, err := mcp.Import(context.Background(), rt, o)
	if err != nil {
		t.Fatal(err)
	}
	<-inWindow
	err = im.Close(context.Background())
	ended := ss.wasDeleted("s2")
	close(closeReturned)
	if err != nil {
		t.Errorf("Close: %v", err)
	}
	if !ended {
		t.Errorf("Close returned before the session of the reconnection in flight was ended")
	}
}

// TestImport_CloseReportsADeleteCutAtItsBound: a server that holds the
// DELETE of the session past its bound is not waited for, and Close
// (whose context did not end) says the server was not told the session
// ended, rather than nothing.
func TestImport_CloseReportsADeleteCutAtItsBound(t *testing.T) {
	_, url := newSessionServer(t, "", func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	rt := actorstest.NewRuntime(t, nil)
	im, err := mcp.Import(context.Background(), rt, &mcp.ImportOptions{URL: url, KeepAlive: -1})
	if err != nil {
		t.Fatal(err)
	}
	err = im.Close(context.Background())
	if err == nil || !strings.Contains(err.Error(), "the server was not told the session ended") || !strings.Contains(err.Error(), "2s") {
		t.Fatalf("Close: %v; want it to say the server was not told the session ended, its DELETE not answered within 2s", err)
	}
}

// records is a slog handler that sends the records of one message on a
// channel, while it has room.
type records struct {
	msg string
	out chan<- slog.Record
}

func (h records) Enabled(context.Context, slog.Level) bool { return true }
func (h records) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h records) WithGroup(string) slog.Handler            { return h }
func (h records) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		select {
		case h.out <- r.Clone():
		default: // the test has the first
		}
	}
	return nil
}

// TestImport_RestartLogsADeleteThatFailed: the keepalive finds the first
// session silent and the connection is made again without waiting for
// the DELETE that ends it; that DELETE fails (the server drops the
// connection), which is logged as a warning with its error, and is no
// error of a later Close, which ends the second session alone.
func TestImport_RestartLogsADeleteThatFailed(t *testing.T) {
	ss, url := newSessionServer(t, "s1", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Session-Id") != "s1" {
			w.WriteHeader(http.StatusOK)
			return
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		_ = conn.Close() // no answer: the client's DELETE fails
	})
	warnings := make(chan slog.Record, 1)
	o := &mcp.ImportOptions{URL: url, KeepAlive: 100 * time.Millisecond, KeepAliveMisses: 1,
		Logger: slog.New(records{msg: "MCP server not told the session ended", out: warnings})}
	rt := actorstest.NewRuntime(t, nil)
	im, err := mcp.Import(context.Background(), rt, o)
	if err != nil {
		t.Fatal(err)
	}
	w := <-warnings
	var why string
	w.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			why = a.Value.String()
		}
		return true
	})
	if w.Level != slog.LevelWarn || why == "" {
		t.Errorf("logged %v %q with err %q; want a warning saying why", w.Level, w.Message, why)
	}
	if !ss.wasDeleted("s1") {
		t.Errorf("the warning came before the DELETE of s1")
	}
	if err := im.Close(context.Background()); err != nil {
		t.Errorf("Close: %v; want the failed DELETE of the restart in the log only", err)
	}
}

// TestImport_CloseReportsTheStatusOfTheDelete: a server that answers the
// DELETE ending its session with an error status did not end it, and
// Close says so, with the status and the URL of the import (where the
// DELETE went), its user info and the values of its
// query (where a token may be) cut out. A server that does not allow DELETE (405, as MCP's
// transport lets it answer) or no longer knows the session (404, as it
// answers for one it ended) holds no session: Close has nothing to say.
func TestImport_CloseReportsTheStatusOfTheDelete(t *testing.T) {
	const password, token = "pass-0123456789", "tok-0123456789"
	for _, c := range []struct {
		status int
		want   string // in Close's error; none when empty
	}{
		{http.StatusInternalServerError, "HTTP 500 Internal Server Error"},
		{http.StatusForbidden, "HTTP 403 Forbidden"},
		{http.StatusMethodNotAllowed, ""},
		{http.StatusNotFound, ""},
	} {
		t.Run(http.StatusText(c.status), func(t *testing.T) {
			ss, base := newSessionServer(t, "", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(c.status) })
			url := strings.Replace(base, "://", "://me:"+password+"@", 1) + "/mcp?token=" + token + "&v=1&" + token
			err := ss.importAndClose(t, url)
			if c.want == "" {
				if err != nil {
					t.Fatalf("Close: %v; want no error", err)
				}
				return
			}
			redacted := strings.Replace(base, "://", "://xxxxx:xxxxx@", 1) + "/mcp?token=xxxxx&v=xxxxx&xxxxx"
			if err == nil || !strings.Contains(err.Error(), "mcp: close import "+redacted+": the server did not end the session: it answered the DELETE with "+c.want) {
				t.Fatalf("Close: %v; want it to say the server did not end the session, with the status and the URL of the DELETE", err)
			}
			if strings.Contains(err.Error(), password) || strings.Contains(err.Error(), token) {
				t.Fatalf("Close: %v; holds a credential of the URL", err)
			}
		})
	}
}

// TestImport_ReturnsWhenItsContextEndsWhileTheServerHoldsTheList: an
// Import whose context ends while the server holds its tools/list (and
// its ConnectTimeout is far off) returns its context's error, the
// connection attempt cut short, though the server holds the DELETE of
// the session that attempt opened too; nothing of the import is left
// running.
func TestImport_ReturnsWhenItsContextEndsWhileTheServerHoldsTheList(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := postServer(t, func(_ http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // held until the client gives it up
	}, func(w http.ResponseWriter, r *http.Request, body []byte) {
		var req struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &req)
		switch req.Method {
		case "initialize":
			w.Header().Set("Mcp-Session-Id", "only")
		case "tools/list":
			cancel() // Import's context ends while it waits for the list
			<-r.Context().Done()
			return
		}
		writeBound(w, body)
	})
	rt := actorstest.NewRuntime(t, nil)
	im, err := mcp.Import(ctx, rt, &mcp.ImportOptions{URL: srv.URL, KeepAlive: -1, ConnectTimeout: time.Hour})
	if im != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("Import: %v, %v; want its context's error", im, err)
	}
}
