package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/mcp"
)

// TestImport_CloseReportsTheStatusOfTheDelete: a server that answers the
// DELETE ending its session with an error status did not end it, and
// Close says so, with the status and the URL of the import (where the
// DELETE went), the password of its user info and the values of its
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
			rt := actorstest.NewRuntime(t, nil)
			im, err := mcp.Import(context.Background(), rt, &mcp.ImportOptions{URL: url, KeepAlive: -1})
			if err != nil {
				t.Fatal(err)
			}
			err = im.Close(context.Background())
			if !ss.wasDeleted("s1") {
				t.Fatal("Close returned before the session's DELETE was sent")
			}
			if c.want == "" {
				if err != nil {
					t.Fatalf("Close: %v; want no error", err)
				}
				return
			}
			redacted := strings.Replace(base, "://", "://me:xxxxx@", 1) + "/mcp?token=xxxxx&v=xxxxx&xxxxx"
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
