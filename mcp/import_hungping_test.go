package mcp_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/mcp"
	"github.com/polyweave/polyweave-go/models/scripted"
)

// TestImport_ResultItCannotReadWithASlowPing: the ping that tells a
// broken connection from an undecodable result (broken, import.go) runs
// on the call's own context. A server whose ping is not answered at once
// (one that serves its requests one at a time and is busy, or one that
// hangs pings) holds the call's answer until the call's timeout: the
// model is told the call timed out, not what went wrong with its result,
// and the call takes its whole timeout. The call's answer is the decode
// error, whatever the ping does.
func TestImport_ResultItCannotReadWithASlowPing(t *testing.T) {
	inner := jsonRPCServer(t, "{}")
	release := make(chan struct{})
	fwd := &http.Transport{DisableKeepAlives: true}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"method":"ping"`)) {
			select { // a ping not answered while the call waits
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, inner.URL, bytes.NewReader(body))
		req.Header = r.Header.Clone()
		res, err := fwd.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer res.Body.Close()
		for k, v := range res.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(res.StatusCode)
		_, _ = io.Copy(w, res.Body)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	rt := actorstest.NewRuntime(t, nil)
	im := imported(t, rt, &mcp.ImportOptions{URL: srv.URL, CallTimeout: 2 * time.Second})
	res := runLoop(t, rt, im.Tools(),
		scripted.Turn{ToolCalls: []scripted.ToolCall{{ID: "bad", Name: "odd"}}},
		scripted.Turn{Text: "done"})
	f := res["bad"]
	if f == nil || !f.IsErrorResult() {
		t.Fatalf("odd: %v, want an error result", f)
	}
	if kind := f.GetMeta().GetFailureKind(); kind == "timeout" || strings.Contains(strings.ToLower(string(f.GetPayload())), "timed out") {
		t.Errorf("odd: answered as a timeout (kind %q): %s; want its decode error", kind, f.GetPayload())
	}
}
