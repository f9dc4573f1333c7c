package mcp

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/internal/syncbuf"
	"github.com/polyweave/polyweave-go/internal/urlredact"
)

// failingTrip is a transport whose every request fails with err.
type failingTrip struct{ err error }

func (f failingTrip) RoundTrip(*http.Request) (*http.Response, error) { return nil, f.err }

// The error of a DELETE that failed below the HTTP client is the
// transport's own, which may quote a credential (a proxy refusing the
// tunnel quotes the basic auth it was sent, in the reason the transport
// makes its error); neither the warning of a restart nor the error of a
// Close shows it.
func TestSessionEnd_FailureShowsNoCredentials(t *testing.T) {
	const password = "proxy-pass-1123581321"
	u, err := url.Parse("https://mcp.example/mcp")
	if err != nil {
		t.Fatal(err)
	}
	proxy := &url.URL{Scheme: "http", Host: "proxy.example:3128", User: url.UserPassword("me", password)}
	var logs syncbuf.Buffer
	im := &Imported{name: urlredact.URL(u), scrub: urlScrubber(u, "", http.ProxyURL(proxy)),
		opts: ImportOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))}}
	im.givenUp, im.giveUp = context.WithCancelCause(context.Background())
	im.closing, im.shutting = context.WithCancelCause(context.Background())
	defer im.giveUp(nil)
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("me:"+password))
	e := sessionEnd{next: failingTrip{errors.New("refused " + basic)}, im: im}
	req, err := http.NewRequest(http.MethodDelete, u.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = e.RoundTrip(req) // a restart's DELETE: logged
	if !strings.Contains(logs.String(), "refused Basic xxxxx") || strings.Contains(logs.String(), password) || strings.Contains(logs.String(), basic) {
		t.Errorf("log %q; want the transport's error with its credential cut out", logs.String())
	}
	im.shutting(errImportClosed)
	_, _ = e.RoundTrip(req) // Close's DELETE: in Close's error
	im.endMu.Lock()
	defer im.endMu.Unlock()
	if im.endErr == nil || !strings.Contains(im.endErr.Error(), "refused Basic xxxxx") || strings.Contains(im.endErr.Error(), password) || strings.Contains(im.endErr.Error(), basic) {
		t.Errorf("Close's error %v; want the transport's error with its credential cut out", im.endErr)
	}
}
