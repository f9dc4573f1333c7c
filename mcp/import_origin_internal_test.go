package mcp

import (
	"net/url"
	"testing"
)

// TestSameOrigin: the bearer token goes to a URL of the import's origin
// however the server spells it (the scheme's default port written or
// not, the host in other case, with the trailing dot of a fully
// qualified name, or an international name in its ASCII form), and to
// no other: another scheme, port or host, or a host that holds the
// import's as a part of it.
func TestSameOrigin(t *testing.T) {
	for _, c := range []struct {
		to, other string
		same      bool
	}{
		{"https://mcp.example/mcp", "https://mcp.example:443/other", true},
		{"https://mcp.example:443/mcp", "https://mcp.example/other", true},
		{"http://mcp.example/mcp", "http://mcp.example:80/", true},
		{"https://mcp.example/mcp", "https://MCP.Example/mcp", true},
		{"https://mcp.example/mcp", "https://mcp.example./mcp", true},
		{"https://mcp.example./mcp", "https://mcp.example/mcp", true},
		{"https://bücher.example/mcp", "https://xn--bcher-kva.example/mcp", true},
		{"https://[::1]:8080/mcp", "https://[::1]:8080/x", true},
		{"https://mcp.example/mcp", "http://mcp.example/mcp", false},
		{"https://mcp.example/mcp", "http://mcp.example:443/mcp", false},
		{"https://mcp.example/mcp", "https://mcp.example:8443/mcp", false},
		{"https://mcp.example/mcp", "https://mcp.example.evil/mcp", false},
		{"https://mcp.example/mcp", "https://evil.example/mcp", false},
		{"https://mcp.example/mcp", "https://mcp.example..:443/mcp", false},
		{"https://[::1]:8080/mcp", "https://[::2]:8080/mcp", false},
	} {
		to, err := url.Parse(c.to)
		if err != nil {
			t.Fatal(err)
		}
		other, err := url.Parse(c.other)
		if err != nil {
			t.Fatal(err)
		}
		if got := sameOrigin(other, to); got != c.same {
			t.Errorf("sameOrigin(%s, %s) = %v, want %v", c.other, c.to, got, c.same)
		}
	}
}

// TestURLScrubber_CutsTheUserInfoOfTheURLAlone: a short user name ("me")
// is cut out of the URL an error names, not out of the words that end
// with it (an address at the same host the server's reason gives).
func TestURLScrubber_CutsTheUserInfoOfTheURLAlone(t *testing.T) {
	for _, c := range []struct{ url, text, want string }{
		{"https://me@mcp.example/mcp", `ask home@mcp.example: Post "https://me@mcp.example/mcp": EOF`,
			`ask home@mcp.example: Post "https://xxxxx@mcp.example/mcp": EOF`},
		{"https://me:pw@mcp.example/mcp", `ask home:pw@mcp.example: Post "https://me:***@mcp.example/mcp": EOF`,
			`ask home:pw@mcp.example: Post "https://xxxxx:xxxxx@mcp.example/mcp": EOF`},
	} {
		u, err := url.Parse(c.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := urlScrubber(u, "", nil).Replace(c.text); got != c.want {
			t.Errorf("%s: scrubbed %q to %q, want %q", c.url, c.text, got, c.want)
		}
	}
}
