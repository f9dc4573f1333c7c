package origin_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/polyweave/polyweave-go/internal/origin"
)

// TestSame: a URL is of another's origin however it is spelled (the
// scheme's default port written or not, the scheme and host in other
// case, with the trailing dot of a fully qualified name, an international
// name in its ASCII form, user info or none), and of no other: another
// scheme, port or host, or a host that holds the other's as a part of it.
func TestSame(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"https://api.example/v1", "https://api.example:443/other", true},
		{"https://api.example:443/v1", "https://api.example/other", true},
		{"http://api.example/v1", "http://api.example:80/", true},
		{"HTTPS://api.example/v1", "https://api.example/v1", true},
		{"https://api.example/v1", "https://API.Example/v1", true},
		{"https://api.example/v1", "https://api.example./v1", true},
		{"https://api.example./v1", "https://api.example/v1", true},
		{"https://bücher.example/v1", "https://xn--bcher-kva.example/v1", true},
		{"https://BÜCHER.example/v1", "https://xn--bcher-kva.example/v1", true},
		{"https://[::1]:8080/v1", "https://[::1]:8080/x", true},
		{"http://[::1]/v1", "http://[::1]:80/x", true},
		{"https://[2001:DB8::1]/v1", "https://[2001:db8::1]:443/x", true},
		{"https://me:secret@api.example/v1", "https://api.example/v1", true},
		{"https://me@api.example/v1", "https://you@api.example/v1", true},
		{"https://api.example/v1?a=1#f", "https://api.example/v2?b=2", true},
		{"https://api.example/v1", "http://api.example/v1", false},
		{"https://api.example/v1", "http://api.example:443/v1", false},
		{"http://api.example/v1", "https://api.example:80/v1", false},
		{"https://api.example/v1", "https://api.example:8443/v1", false},
		{"https://api.example/v1", "https://api.example.evil/v1", false},
		{"https://api.example/v1", "https://evil.example/v1", false},
		{"https://api.example/v1", "https://api.example..:443/v1", false},
		{"https://bücher.example/v1", "https://bucher.example/v1", false},
		{"https://[::1]:8080/v1", "https://[::2]:8080/v1", false},
		{"https://[::1]/v1", "https://[::1]:8443/v1", false},
		{"https://127.0.0.1/v1", "https://[::1]/v1", false},
	} {
		a, err := url.Parse(c.a)
		if err != nil {
			t.Fatal(err)
		}
		b, err := url.Parse(c.b)
		if err != nil {
			t.Fatal(err)
		}
		if got := origin.Same(a, b); got != c.same {
			t.Errorf("Same(%s, %s) = %v, want %v", c.a, c.b, got, c.same)
		}
		if got := origin.Same(b, a); got != c.same {
			t.Errorf("Same(%s, %s) = %v, want %v", c.b, c.a, got, c.same)
		}
	}
}

// TestIsRedirect: the statuses http.Client follows, and no other.
func TestIsRedirect(t *testing.T) {
	for status := 100; status < 600; status++ {
		want := status == http.StatusMovedPermanently || status == http.StatusFound || status == http.StatusSeeOther ||
			status == http.StatusTemporaryRedirect || status == http.StatusPermanentRedirect
		if got := origin.IsRedirect(status); got != want {
			t.Errorf("IsRedirect(%d) = %v, want %v", status, got, want)
		}
	}
}

// TestLeaves: an answer leaves the origin when it is a redirect
// http.Client would follow (a status it follows, with a Location) to
// another origin, or to a Location that does not parse; a relative
// Location stays where the request was sent.
func TestLeaves(t *testing.T) {
	from, err := url.Parse("https://api.example/v1/messages")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		status   int
		location string
		leaves   bool
	}{
		{http.StatusFound, "https://evil.example/v1", true},
		{http.StatusTemporaryRedirect, "http://api.example/v1", true},
		{http.StatusPermanentRedirect, "https://api.example:8443/v1", true},
		{http.StatusSeeOther, "https://api.example/%zz", true},
		{http.StatusTemporaryRedirect, "//evil.example/v1", true},
		{http.StatusMovedPermanently, "https://API.example:443/v2", false},
		{http.StatusTemporaryRedirect, "/v2/messages", false},
		{http.StatusTemporaryRedirect, "v2", false},
		{http.StatusTemporaryRedirect, "?page=2", false},
		{http.StatusTemporaryRedirect, "", false},
		{http.StatusMultipleChoices, "https://evil.example/v1", false},
		{http.StatusNotModified, "https://evil.example/v1", false},
		{http.StatusOK, "https://evil.example/v1", false},
	} {
		req, err := http.NewRequest(http.MethodPost, from.String(), nil)
		if err != nil {
			t.Fatal(err)
		}
		res := &http.Response{StatusCode: c.status, Header: http.Header{}, Request: req}
		if c.location != "" {
			res.Header.Set("Location", c.location)
		}
		if got := origin.Leaves(res, from, from); got != c.leaves {
			t.Errorf("HTTP %d to %q: Leaves = %v, want %v", c.status, c.location, got, c.leaves)
		}
	}
}

// TestLeaves_ReadsTheLocationAgainstTheURLSent: a relative Location is
// read against the URL of the request sent, as http.Client reads it, not
// against the response's Request, which a RoundTripper need not set (nor
// set to the request it was given): with none, a relative Location on
// the request's origin stays there; with one for another place, it still
// counts where the request was sent.
func TestLeaves_ReadsTheLocationAgainstTheURLSent(t *testing.T) {
	from, err := url.Parse("https://api.example/v1/messages")
	if err != nil {
		t.Fatal(err)
	}
	elsewhere, err := http.NewRequest(http.MethodPost, "https://evil.example/v1", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		sent     string
		request  *http.Request // res.Request
		location string
		leaves   bool
	}{
		{"https://api.example/v1/messages", nil, "/v1", false},
		{"https://api.example/v1/messages", nil, "v2", false},
		{"https://api.example/v1/messages", elsewhere, "/v1", false},
		{"https://api.example:443/v2", nil, "/v1", false},
		{"https://evil.example/v1", nil, "/v1", true},
		{"http://api.example/v1", nil, "/v1", true},
	} {
		sent, err := url.Parse(c.sent)
		if err != nil {
			t.Fatal(err)
		}
		res := &http.Response{StatusCode: http.StatusTemporaryRedirect, Header: http.Header{"Location": {c.location}}, Request: c.request}
		if got := origin.Leaves(res, sent, from); got != c.leaves {
			t.Errorf("%q sent, Request %v, to %q: Leaves = %v, want %v", c.sent, c.request != nil, c.location, got, c.leaves)
		}
	}
}
