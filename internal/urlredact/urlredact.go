// Package urlredact is the one rule by which the model adapters' errors
// (models/internal/httpadapter) and an MCP import's (mcp) cut the
// credentials out of the URLs they name: the user info (the user name
// may be a token too: https://TOKEN@host/), the value of each query
// parameter (where a server may take a token) and of each parameter of
// the fragment (where an OAuth server puts one: #access_token=...), each
// replaced by [Mark]. The scheme, host, port, path and the names of the
// parameters are kept, so that an error still says where a request
// went, and a URL so cut still parses as one.
//
// In a text (an error's), a URL is what follows a "://" (whatever
// stands before it, a scheme or nothing), or its slashes escaped as
// JSON may escape them (`:\/\/`, and `:\\/\\/` as %q quotes that).
// Opened by a double quote before its scheme, as Go's %q and JSON quote
// it, it runs to the quote that closes it, past the characters a
// backslash escapes (a quote of the URL) and past spaces, which these
// leave as they are; otherwise (or when no quote closes it on its
// line), it runs to the first space, character that does not print,
// quote (" ' or `), angle bracket (< or >) or backslash (a quote within
// a quote follows one) that does not escape, as JSON does, a character
// a URL holds (`\/`, `\u0026` for '&' as Go's encoding/json writes it,
// and so with the backslashes of a quote of JSON), less the punctuation
// of the sentence it ends ('.', ',', ':', ';', '!', '?', a ')' or ']' it
// does not open, and any other that is not ASCII, such as the '…' of a
// clipped quote). Its authority runs to the first '/', '?' or '#',
// and its user info to the last '@' of the authority, as url.Parse reads
// it; its query runs from the first '?' past the authority to the first
// '#', and its fragment from that '#' to the end. The URL is cut as
// written, not parsed: one that does not parse is cut all the same.
package urlredact

import (
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Mark is what stands for a credential cut out of a URL: as
// url.URL.Redacted writes the password, and a URL so cut still parses.
const Mark = "xxxxx"

// URL returns u written with its user info and the values of the
// parameters of its query and fragment replaced by [Mark], and so those
// of a URL its path holds (as [Text] cuts them).
func URL(u *url.URL) string {
	r := *u
	if r.User != nil {
		r.User = User(r.User)
	}
	r.RawQuery = Params(r.RawQuery)
	fragment := ""
	if r.Fragment != "" || r.RawFragment != "" {
		fragment = "#" + Params(r.EscapedFragment()) // as String writes it
	}
	r.Fragment, r.RawFragment = "", ""
	// Quoted, as an error quotes it: the URL runs to its end whatever it
	// holds, and what Text cuts (to an '@', '&' or '#') ends no escape.
	q := Text(strconv.Quote(r.String() + fragment))
	if s, err := strconv.Unquote(q); err == nil {
		return s
	}
	return q
}

// Text returns text with the credentials of every URL it names cut out,
// as [URL] cuts them.
func Text(text string) string {
	return eachURL(text, func(sep, start int) int { return urlEnd(text, sep, start) },
		func(rest string) (int, int, string) { return 0, len(rest), cutRest(rest) })
}

// eachURL returns text with what cut makes of each URL it holds: of the
// part past its separator, to where end says that part ends, cut
// replaces part[from:to] with what it returns.
func eachURL(text string, end func(sep, start int) int, cut func(part string) (from, to int, with string)) string {
	var b strings.Builder
	done := 0 // text[:done] is in b
	for i := 0; ; {
		sep, n := nextSeparator(text, i)
		if sep < 0 {
			break
		}
		start := sep + n
		i = end(sep, start)
		from, to, with := cut(text[start:i])
		if with != text[start+from:start+to] {
			b.Grow(len(text)) // as long as it, or a little longer: once
			b.WriteString(text[done : start+from])
			b.WriteString(with)
			done = start + to
		}
	}
	if done == 0 {
		return text
	}
	b.WriteString(text[done:])
	return b.String()
}

// cutRest cuts the credentials out of rest, what follows the "://" of a
// URL.
func cutRest(rest string) string {
	if sep, _ := nextSeparator(rest, 0); !strings.ContainsAny(rest, "@?#") && sep < 0 {
		return rest // nothing to cut
	}
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		authority = userText(strings.Contains(authority[:at], ":")) + authority[at:]
	}
	tail, fragment, hasFragment := strings.Cut(tail, "#")
	path, query, hasQuery := strings.Cut(tail, "?")
	// A path may hold a URL of its own (https://archive.example/https://me@host/).
	tail = pathUsers(path)
	if hasQuery {
		tail += "?" + Params(query)
	}
	if hasFragment {
		tail += "#" + Params(fragment)
	}
	return authority + tail
}

// pathUsers returns path, a URL's, with the user info of each URL it
// holds cut out (the query and fragment of those are the path's URL's):
// in one pass, whatever the URLs it nests, where a cut of each as a URL
// of its own would go over the rest of the path again.
func pathUsers(path string) string {
	return eachURL(path, func(_, start int) int {
		if end := strings.IndexFunc(path[start:], endsAuthority); end >= 0 {
			return start + end
		}
		return len(path)
	}, func(authority string) (int, int, string) {
		at := strings.LastIndexByte(authority, '@')
		if at < 0 {
			return 0, 0, ""
		}
		return 0, at, userText(strings.Contains(authority[:at], ":"))
	})
}

// endsAuthority reports whether r ends the authority of a URL in a path.
func endsAuthority(r rune) bool { return r == '/' || r != '\\' && endsURL(r) }

// User returns the user info that stands for u: [Mark] for the user
// name, and for the password when u has one.
func User(u *url.Userinfo) *url.Userinfo {
	_, password := u.Password()
	return user(password)
}

// userText is user(password) as a URL writes it.
func userText(password bool) string {
	if password {
		return Mark + ":" + Mark
	}
	return Mark
}

func user(password bool) *url.Userinfo {
	if password {
		return url.UserPassword(Mark, Mark)
	}
	return url.User(Mark)
}

// Params returns q, a raw query (or a fragment written as one), with the
// value of each of its '&'-separated parameters replaced by [Mark]: the
// name before a '=' is kept, and a parameter with no '=' is a value
// alone. An empty value, or an empty parameter, stays empty: there is
// nothing to cut.
func Params(q string) string {
	if q == "" {
		return q
	}
	params := strings.Split(q, "&")
	for i, p := range params {
		name, value, ok := strings.Cut(p, "=")
		switch {
		case value == "" && (ok || name == ""):
		case ok:
			params[i] = name + "=" + Mark
		default:
			params[i] = Mark
		}
	}
	return strings.Join(params, "&")
}

// nextSeparator returns where the first separator of a scheme from an
// authority at or past text[from:] is, and its length: "://", or with
// each slash escaped by the same backslashes (`:\/\/`); -1 when there
// is none.
func nextSeparator(text string, from int) (at, n int) {
	for i := from; ; {
		j := strings.IndexByte(text[i:], ':')
		if j < 0 {
			return -1, 0
		}
		i += j
		if n := separatorLen(text[i:]); n > 0 {
			return i, n
		}
		i++
	}
}

// separatorLen returns the length of the separator text begins with, or
// 0.
func separatorLen(text string) int {
	escapes := 0
	for 1+escapes < len(text) && text[1+escapes] == '\\' {
		escapes++
	}
	slash := 1 + escapes // the length of one slash, escaped
	if len(text) < 1+2*slash || text[slash] != '/' || text[2*slash] != '/' || strings.Count(text[1+slash:2*slash], `\`) != escapes {
		return 0
	}
	return 1 + 2*slash
}

// urlEnd returns where the URL whose separator is at text[sep:] and
// whose authority begins at start ends.
func urlEnd(text string, sep, start int) int {
	scheme := strings.LastIndexFunc(text[:sep], func(r rune) bool { return !isSchemeRune(r) }) + 1
	if quoted := scheme > 0 && text[scheme-1] == '"' && (scheme < 2 || text[scheme-2] != '\\'); quoted {
		for k := start; k < len(text); k++ {
			switch c := text[k]; {
			case c == '\\':
				k++ // what it escapes
			case c == '"':
				return k
			case c < ' ' || c == 0x7f:
				k = len(text) // not as %q writes it
			}
		}
	}
	end := start
	for end < len(text) {
		r, size := utf8.DecodeRuneInString(text[end:])
		if r == '\\' {
			size = escapeLen(text[end:])
		}
		if size == 0 || r != '\\' && endsURL(r) {
			break
		}
		end += size
	}
	return start + withoutPunct(text[start:end])
}

// escapeLen returns the length of the escape text begins with (one or
// more backslashes) when it escapes a character a URL holds, as JSON
// escapes it (`\/`, `\u0026`), or 0.
func escapeLen(text string) int {
	n := len(text) - len(strings.TrimLeft(text, `\`))
	switch rest := text[n:]; {
	case strings.HasPrefix(rest, "/"):
		return n + 1
	case len(rest) >= 5 && rest[0] == 'u':
		if v, err := strconv.ParseUint(rest[1:5], 16, 16); err == nil && !endsURL(rune(v)) {
			return n + 5
		}
	}
	return 0
}

// withoutPunct returns the length of url, written unquoted in a text,
// without the punctuation at its end that belongs to the text.
func withoutPunct(url string) int {
	parens := strings.Count(url, ")") - strings.Count(url, "(")   // the ')' it does not open
	brackets := strings.Count(url, "]") - strings.Count(url, "[") // and ']'
	for url != "" {
		r, size := utf8.DecodeLastRuneInString(url)
		switch {
		case strings.ContainsRune(".,:;!?", r):
		case r == ')' && parens > 0:
			parens--
		case r == ']' && brackets > 0:
			brackets--
		case r >= utf8.RuneSelf && unicode.IsPunct(r):
		default:
			return len(url)
		}
		url = url[:len(url)-size]
	}
	return 0
}

func isSchemeRune(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '+' || r == '-' || r == '.'
}

// endsURL reports whether r ends a URL in an error's text.
func endsURL(r rune) bool {
	return strings.ContainsRune("\"'`<>\\", r) || unicode.IsSpace(r) || !unicode.IsPrint(r)
}
