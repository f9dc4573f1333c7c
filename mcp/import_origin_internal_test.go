package mcp

import (
	"net/url"
	"testing"
)

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
