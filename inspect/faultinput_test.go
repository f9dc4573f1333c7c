package inspect_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/inspect"
)

// TestFaults_MissingInputIsABadRequest: a fault post that names no
// actor, tool or stream is malformed (400, saying what is missing), not
// a search for one named "" (404).
func TestFaults_MissingInputIsABadRequest(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	in, err := inspect.New(rt, &inspect.Options{Faults: true, AllowRemote: true})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	for _, c := range []struct{ path, form, says string }{
		{"/api/fault/panic", "", "no actor given"},
		{"/api/fault/stall", "on=true", "no tool given"},
		{"/api/fault/cut", "", "no stream given"},
	} {
		req := httptest.NewRequest(http.MethodPost, c.path, strings.NewReader(c.form))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "http://example.com")
		rec := httptest.NewRecorder()
		in.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), c.says) {
			t.Errorf("POST %s %q: %d %q, want 400 saying %q", c.path, c.form, rec.Code, rec.Body.String(), c.says)
		}
	}
}

// TestFaults_CrossOriginPostsAreRefused: a page of another origin open
// in the browser cannot post faults, whatever it is: another site,
// another port of this machine (same-site, not same-origin), a
// sandboxed frame or a file (Origin "null"); AllowRemote lifts none of
// it. Nothing is done: the refusal comes before the form is read.
func TestFaults_CrossOriginPostsAreRefused(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	in, err := inspect.New(rt, &inspect.Options{Faults: true, AllowRemote: true})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	for _, h := range []http.Header{
		{"Origin": {"http://evil.example"}},
		{"Origin": {"http://localhost:3000"}, "Sec-Fetch-Site": {"same-site"}},
		{"Origin": {"http://localhost:3000"}},
		{"Origin": {"null"}},
		{"Sec-Fetch-Site": {"cross-site"}},
		{"Sec-Fetch-Site": {"same-site"}},
	} {
		req := httptest.NewRequest(http.MethodPost, "http://localhost:8080/api/fault/stall", strings.NewReader("tool=x&on=true"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range h {
			req.Header[k] = v
		}
		rec := httptest.NewRecorder()
		in.ServeHTTP(rec, req)
		if rec.Code != http.StatusForbidden {
			t.Errorf("POST with %v: %d %q, want 403", h, rec.Code, rec.Body.String())
		}
	}
	if n := len(in.Snapshot("").Feed); n != 0 {
		t.Errorf("refused posts left %d feed items", n)
	}
}

// TestPage_NotFramedByOtherSites: with Faults, the page has buttons that
// break things; a site of another origin framing it (under a decoy, to
// have them clicked: the posts would then be the page's own) is refused
// by the browser.
func TestPage_NotFramedByOtherSites(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	in, err := inspect.New(rt, &inspect.Options{Faults: true})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	req := httptest.NewRequest(http.MethodGet, "http://localhost:8080/", nil)
	req.RemoteAddr = "127.0.0.1:1234"
	rec := httptest.NewRecorder()
	in.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /: %d %q", rec.Code, rec.Body.String())
	}
	if got := rec.Header().Get("X-Frame-Options"); got != "SAMEORIGIN" {
		t.Errorf("X-Frame-Options: %q, want SAMEORIGIN", got)
	}
	if got := rec.Header().Get("Content-Security-Policy"); !strings.Contains(got, "frame-ancestors 'self'") {
		t.Errorf("Content-Security-Policy: %q, want frame-ancestors 'self'", got)
	}
}

// TestFaults_ErrorsClipWhatTheyEcho: a fault post's error names what was
// asked for clipped to Options.Clip, as the page shows model-made
// strings: a long id (a few kilobytes, under the form's bound) is not
// sent back whole.
func TestFaults_ErrorsClipWhatTheyEcho(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	in, err := inspect.New(rt, &inspect.Options{Faults: true, AllowRemote: true})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	huge := strings.Repeat("z", 6000)
	for _, c := range []struct{ path, field string }{
		{"/api/fault/panic", "actor"},
		{"/api/fault/stall", "tool"},
		{"/api/fault/cut", "stream"},
	} {
		req := httptest.NewRequest(http.MethodPost, c.path, strings.NewReader(c.field+"="+huge+"&on=true"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "http://example.com")
		rec := httptest.NewRecorder()
		in.ServeHTTP(rec, req)
		if rec.Code != http.StatusNotFound || rec.Body.Len() > 2*inspect.DefaultClip+200 || !strings.Contains(rec.Body.String(), "(6000 bytes)") {
			t.Errorf("POST %s of a 6000-byte %s: %d, %d bytes: want 404 naming it clipped", c.path, c.field, rec.Code, rec.Body.Len())
		}
	}
}
