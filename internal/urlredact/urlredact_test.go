package urlredact_test

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/internal/urlredact"
)

// TestText: the user info, query values and fragment values of each URL
// in a text are cut out, whoever wrote the URL, the place (scheme, host,
// port, path, the parameters' names) kept; a URL opened by a double
// quote runs to the quote that closes it (as %q and JSON write it),
// another to the first space, unprintable character, quote, angle
// bracket or backslash; its authority runs to the first '/', '?' or '#',
// its user info to the last '@' in the authority. A URL with nothing to
// cut, and the words around it, are left as they are.
func TestText(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		// user info, whatever it holds
		{`Post "https://me:***@h/v1": EOF`, `Post "https://xxxxx:xxxxx@h/v1": EOF`},
		{`Post "https://tok%2Fen-0123@h/v1": EOF`, `Post "https://xxxxx@h/v1": EOF`},
		{`Post "https://tok:p@ss@h/v1": EOF`, `Post "https://xxxxx:xxxxx@h/v1": EOF`},
		{`Post "https://me@[::1]:8080/v1": EOF`, `Post "https://xxxxx@[::1]:8080/v1": EOF`},
		{`a://x@y/p?k=v b://z`, `a://xxxxx@y/p?k=xxxxx b://z`},
		{`://me:pw@h/`, `://xxxxx:xxxxx@h/`},
		// query values
		{`Post "http://h:1/moved?token=secret-0123&v=2": EOF`, `Post "http://h:1/moved?token=xxxxx&v=xxxxx": EOF`},
		{`Post "https://tok@h/p?secret": stopped after 10 redirects`, `Post "https://xxxxx@h/p?xxxxx": stopped after 10 redirects`},
		{`http://h/p?a=&b&&c=1`, `http://h/p?a=&xxxxx&&c=xxxxx`},
		{`http://h?a=1`, `http://h?a=xxxxx`},
		// fragment values, as query values
		{`Get "https://me:***@h?a=1#frag?b=2"`, `Get "https://xxxxx:xxxxx@h?a=xxxxx#frag?b=xxxxx"`},
		{`http://h/cb#access_token=tok-0123&token_type=bearer`, `http://h/cb#access_token=xxxxx&token_type=xxxxx`},
		{`see http://h/p? or http://h/q#a?b and home@h`, `see http://h/p? or http://h/q#xxxxx and home@h`},
		{`http://h/q#`, `http://h/q#`},
		// where a URL ends
		{"Post \"http://h/p?k=v\": EOF", "Post \"http://h/p?k=xxxxx\": EOF"},
		{`'http://h/p?k=v' and k=v`, `'http://h/p?k=xxxxx' and k=v`},
		{"`http://h/p?k=v` and k=v", "`http://h/p?k=xxxxx` and k=v"},
		{`<http://h/p?k=v> and k=v`, `<http://h/p?k=xxxxx> and k=v`},
		{`"Post \"http://h/p?k=v\": EOF"`, `"Post \"http://h/p?k=xxxxx\": EOF"`},
		{"http://h/p?k=v\tk=v", "http://h/p?k=xxxxx\tk=v"},
		{"http://h/p?k=v\x00k=v", "http://h/p?k=xxxxx\x00k=v"},
		{"http://h/p?k=v\u00a0k=v", "http://h/p?k=xxxxx\u00a0k=v"},
		{`http://h\me@x/`, `http://h\me@x/`},
		{`http://h/me@x/`, `http://h/me@x/`},
		{`http://h?me@x/`, `http://h?xxxxx`},
		// quoted, as %q and JSON quote it: to the closing quote
		{`Post "http://h/p?a b=c d&q=\"x\"#e f": EOF`, `Post "http://h/p?a b=xxxxx&q=xxxxx#xxxxx": EOF`},
		{`{"url":"http://me@h/p?a=x y","k":"v"}`, `{"url":"http://xxxxx@h/p?a=xxxxx","k":"v"}`},
		{`"Post \"http://h/p?a=1 2\": EOF"`, `"Post \"http://h/p?a=xxxxx 2\": EOF"`},
		{"\"http://h/p?a=1 2\nb=3\"", "\"http://h/p?a=xxxxx 2\nb=3\""},
		{`"http://h/p?a=1 2`, `"http://h/p?a=xxxxx 2`},
		// escaped, as JSON escapes a URL's characters (Go's "&" as
		// \u0026, others' "/" as \/), and as %q quotes JSON: the escape
		// of a character a URL holds does not end it
		{`{"error":"moved to http://h/p?a=1\u0026token=tok-0123 now"}`, `{"error":"moved to http://h/p?a=xxxxx now"}`},
		{`"{\"error\":\"moved to http://h/p?a=1\\u0026token=tok-0123\"}"`, `"{\"error\":\"moved to http://h/p?a=xxxxx\"}"`},
		{`{"error":"see https:\/\/me:pw@h\/p?token=tok-0123 now"}`, `{"error":"see https:\/\/xxxxx:xxxxx@h\/p?token=xxxxx now"}`},
		{`"{\"error\":\"see https:\\/\\/me:pw@h\\/p?token=tok-0123\"}"`, `"{\"error\":\"see https:\\/\\/xxxxx:xxxxx@h\\/p?token=xxxxx\"}"`},
		{`see http://h/p?a=1\u003e and more`, `see http://h/p?a=xxxxx\u003e and more`},
		{`see http://h/p?a=1\n and more`, `see http://h/p?a=xxxxx\n and more`},
		// the punctuation of the sentence a URL ends is not the URL's
		{`(see http://h/p?token=tok-0123)`, `(see http://h/p?token=xxxxx)`},
		{`see http://h/p?token=tok-0123, and then`, `see http://h/p?token=xxxxx, and then`},
		{`at http://h/p?token=tok-0123.`, `at http://h/p?token=xxxxx.`},
		{`"clipped http://h/p?token=tok-0123…"`, `"clipped http://h/p?token=xxxxx…"`},
		{`http://h/p?k=(tok-0123)`, `http://h/p?k=xxxxx`},
		{`http://h/p?k=.`, `http://h/p?k=.`},
		// a URL in a path, and many URLs
		{`https://archive.example/web/https://me:pw@h/p?k=v`, `https://archive.example/web/https://xxxxx:xxxxx@h/p?k=xxxxx`},
		{`http://a@h1/ http://h2/ http://b@h3/?x=1`, `http://xxxxx@h1/ http://h2/ http://xxxxx@h3/?x=xxxxx`},
		// nothing to cut
		{`Post "http://h/p?k=xxxxx": EOF`, `Post "http://h/p?k=xxxxx": EOF`},
		{`no URL here, mail me@h`, `no URL here, mail me@h`},
		{`http://h/p`, `http://h/p`},
		{``, ``},
	} {
		got := urlredact.Text(c.text)
		if got != c.want {
			t.Errorf("Text(%q) = %q; want %q", c.text, got, c.want)
		}
		if again := urlredact.Text(got); again != got {
			t.Errorf("Text(%q) = %q; cut again: %q", got, got, again)
		}
	}
}

// TestURL: a URL is written with its user info and query and fragment
// values cut out as Text cuts them from its text, and the result parses
// to the same place (its path cut only where it holds a URL).
func TestURL(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"https://me:pw@h/v1?token=t-0123&v=2#access_token=a", "https://xxxxx:xxxxx@h/v1?token=xxxxx&v=xxxxx#access_token=xxxxx"},
		{"https://TOKEN@h:8443/mcp", "https://xxxxx@h:8443/mcp"},
		{"https://me:@h/", "https://xxxxx:xxxxx@h/"},
		{"http://h/p?", "http://h/p?"},
		{"http://h/p#a%20b", "http://h/p#xxxxx"},
		{"http://h/a%20b?k=v", "http://h/a%20b?k=xxxxx"},
		{"https://archive.example/web/https://me:pw@h/p", "https://archive.example/web/https://xxxxx:xxxxx@h/p"},
		{"http://h/p?a b=c d#e f=g h", "http://h/p?a b=xxxxx#e%20f=xxxxx"},
		{"http://h/p", "http://h/p"},
	} {
		u, err := url.Parse(c.url)
		if err != nil {
			t.Fatal(err)
		}
		got := urlredact.URL(u)
		if got != c.want {
			t.Errorf("URL(%s) = %q; want %q", c.url, got, c.want)
		}
		if text, want := urlredact.Text(strconv.Quote(u.String())), strconv.Quote(got); text != want { // as an error quotes it
			t.Errorf("URL(%s) = %q; Text of it quoted = %s", c.url, got, text)
		}
		back, err := url.Parse(got)
		if err != nil {
			t.Errorf("URL(%s) = %q, which does not parse: %v", c.url, got, err)
			continue
		}
		samePath := back.EscapedPath() == u.EscapedPath() || strings.Contains(u.Path, "://") // a URL in the path is cut too
		if back.Host != u.Host || !samePath || back.Scheme != u.Scheme {
			t.Errorf("URL(%s) = %q: another place", c.url, got)
		}
	}
}

// TestParams: each value of a query is cut out, the names kept; a
// parameter with no '=' is a value; empty ones have nothing to cut.
func TestParams(t *testing.T) {
	for _, c := range []struct{ q, want string }{
		{"", ""},
		{"a=1", "a=xxxxx"},
		{"a=1&b=2", "a=xxxxx&b=xxxxx"},
		{"secret", "xxxxx"},
		{"a=&b", "a=&xxxxx"},
		{"a=1=2", "a=xxxxx"},
		{"&&", "&&"},
		{"a=xxxxx&xxxxx", "a=xxxxx&xxxxx"},
	} {
		if got := urlredact.Params(c.q); got != c.want {
			t.Errorf("Params(%q) = %q; want %q", c.q, got, c.want)
		}
	}
}

// FuzzText: no cut shows a URL's user info, nor the value of its query
// as a server's JSON quotes it (encoding/json writes '&' as \u0026)
// and as %q quotes that JSON, and cutting again changes nothing.
func FuzzText(f *testing.F) {
	for _, s := range []string{`Post "https://me:pw@h/v1?k=v#f": EOF`, "a://x@y b://z", "http://h/https://u@h/?a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		got := urlredact.Text(text)
		if again := urlredact.Text(got); again != got {
			t.Errorf("Text(%q) = %q; cut again: %q", text, got, again)
		}
		const secret = "s3cr3t-user"
		withUser := "http://" + secret + "@h/ " + text
		if strings.Contains(urlredact.Text(withUser)[:len("http://xxxxx@h/ ")], secret) {
			t.Errorf("Text(%q) shows the user info", withUser)
		}
		quoted, _ := json.Marshal(text + " http://h/p?a=1&token=" + secret)
		for _, q := range []string{string(quoted), strconv.Quote(string(quoted))} {
			if got := urlredact.Text(q); strings.Contains(got, secret) {
				t.Errorf("Text(%s) = %s, which shows the query's value", q, got)
			}
		}
	})
}

// TestText_URLsNestedInAPath: a text whose path nests URL in URL (a
// redirect's Location, which a server writes as long as its headers may
// be, and http.Client quotes whole) is cut in one pass, not once for
// each URL the path nests: its allocations do not grow with the URLs
// nested (they did, with work that grew faster than the text: seconds
// for 60 kB). Each nested URL's user info is cut.
func TestText_URLsNestedInAPath(t *testing.T) {
	nested := func(n int) string { return "Get \"http://h" + strings.Repeat("/a://me@b", n) + "?k=v\": EOF" }
	want := "Get \"http://h" + strings.Repeat("/a://xxxxx@b", 1000) + "?k=xxxxx\": EOF"
	if got := urlredact.Text(nested(1000)); got != want {
		t.Errorf("Text of 1000 nested URLs = %.120q…; want %.120q…", got, want)
	}
	textOne, textMany := nested(1), nested(1000)
	one := testing.AllocsPerRun(10, func() { urlredact.Text(textOne) })
	many := testing.AllocsPerRun(10, func() { urlredact.Text(textMany) })
	if many > one+2 { // a buffer grown once more, the cut being longer
		t.Errorf("Text allocates %v times for 1000 nested URLs, %v for one: work for each", many, one)
	}
}
