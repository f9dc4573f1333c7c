// Package origin is the one rule by which the model adapters' HTTP client
// (models/internal/httpadapter) and an MCP import's (mcp) tell whether a
// URL is of the origin their requests are for: which redirects they
// follow, and where a credential goes.
package origin

import (
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/net/idna"
)

// Same reports whether a and b have the same scheme, host and port (the
// scheme's default when none is written); their user info, path, query
// and fragment do not count. Hosts are compared as the transport reaches
// them: in any case, with or without the trailing dot of a fully
// qualified name, and an international name in its ASCII form (as the
// transport dials it, and asks its certificate for).
func Same(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && host(a) == host(b) && port(a) == port(b)
}

// IsRedirect reports whether status is one http.Client follows: 301, 302,
// 303, 307 or 308.
func IsRedirect(status int) bool {
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// Leaves reports whether res, the answer to a request sent to the URL
// sent, is a redirect http.Client would follow (a status it follows, with
// a Location) to another origin than from's, or to a Location that does
// not parse. A relative Location is read against sent, as http.Client
// reads it: not against res.Request's URL, which a RoundTripper need not
// set (a relative Location would then stand for no origin at all).
func Leaves(res *http.Response, sent, from *url.URL) bool {
	loc := res.Header.Get("Location")
	if !IsRedirect(res.StatusCode) || loc == "" {
		return false
	}
	to, err := sent.Parse(loc)
	return err != nil || !Same(to, from)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "http":
		return "80"
	case "https":
		return "443"
	}
	return ""
}

func host(u *url.URL) string {
	h := strings.TrimSuffix(u.Hostname(), ".")
	if ascii, err := idna.Lookup.ToASCII(h); err == nil {
		h = ascii
	}
	return strings.ToLower(h)
}
