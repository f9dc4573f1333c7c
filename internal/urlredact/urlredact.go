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
// stands before it, a scheme or nothing). Opened by a double quote
// before its scheme, as Go's %q and JSON quote it, it runs to the quote
// that closes it, past the characters a backslash escapes (a quote of
// the URL) and past spaces, which these leave as they are; otherwise (or
// when no quote closes it on its line), it runs to the first space,
// character that does not print, quote (" ' or `), angle bracket (< or
// >) or backslash (a quote within a quote follows one). Its authority runs to the first '/', '?' or '#',
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
	var b strings.Builder
	done := 0 // text[:done] is in b
	for i := 0; ; {
		j := strings.Index(text[i:], "://")
		if j < 0 {
			break
		}
		start := i + j + len("://")
		end := urlEnd(text, i+j, start)
		i = end
		rest := text[start:end]
		if cut := cutRest(rest); cut != rest {
			b.WriteString(text[done:start])
			b.WriteString(cut)
			done = end
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
	if !strings.ContainsAny(rest, "@?#") && !strings.Contains(rest, "://") {
		return rest // nothing to cut
	}
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		authority = user(strings.Contains(authority[:at], ":")).String() + authority[at:]
	}
	tail, fragment, hasFragment := strings.Cut(tail, "#")
	path, query, hasQuery := strings.Cut(tail, "?")
	// A path may hold a URL of its own (https://archive.example/https://me@host/).
	tail = Text(path)
	if hasQuery {
		tail += "?" + Params(query)
	}
	if hasFragment {
		tail += "#" + Params(fragment)
	}
	return authority + tail
}

// User returns the user info that stands for u: [Mark] for the user
// name, and for the password when u has one.
func User(u *url.Userinfo) *url.Userinfo {
	_, password := u.Password()
	return user(password)
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

// urlEnd returns where the URL whose "://" is at text[sep:] and whose
// authority begins at start ends.
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
	if end := strings.IndexFunc(text[start:], endsURL); end >= 0 {
		return start + end
	}
	return len(text)
}

func isSchemeRune(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '+' || r == '-' || r == '.'
}

// endsURL reports whether r ends a URL in an error's text.
func endsURL(r rune) bool {
	return strings.ContainsRune("\"'`<>\\", r) || unicode.IsSpace(r) || !unicode.IsPrint(r)
}
