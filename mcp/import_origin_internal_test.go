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

// TestRedactURLsIn_CutsTheCredentialsOfEveryURL: the user info and the
// query values of each URL in an error's text are cut out, whichever
// server wrote it, the place (host, path, parameter names, fragment)
// kept; a URL without them, and the words around it, are left as they
// are.
func TestRedactURLsIn_CutsTheCredentialsOfEveryURL(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{`Post "http://h:1/moved?token=secret-0123&v=2": EOF`, `Post "http://h:1/moved?token=xxxxx&v=xxxxx": EOF`},
		{`Post "https://tok@h/p?secret": stopped after 10 redirects`, `Post "https://xxxxx@h/p?xxxxx": stopped after 10 redirects`},
		{`Get "https://me:***@h?a=1#frag?b=2"`, `Get "https://xxxxx:xxxxx@h?a=xxxxx#frag?b=2"`},
		{`see http://h/p? or http://h/q#a?b and home@h`, `see http://h/p? or http://h/q#a?b and home@h`},
		{`a://x@y/p?k=v b://z`, `a://xxxxx@y/p?k=xxxxx b://z`},
		{`Post "http://h/p?k=xxxxx": EOF`, `Post "http://h/p?k=xxxxx": EOF`},
	} {
		if got := redactURLsIn(c.text); got != c.want {
			t.Errorf("redactURLsIn(%q) = %q; want %q", c.text, got, c.want)
		}
	}
}
