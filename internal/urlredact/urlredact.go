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
// stands before it, a scheme or nothing): it runs to the first space,
// character that does not print, quote (" ' or `), angle bracket (< or
// >) or backslash, as a URL is quoted in an error's text (with %q, a
// quote or space of the URL is escaped, and a quote within a quote
// follows a backslash). Its authority runs to the first '/', '?' or '#',
// and its user info to the last '@' of the authority, as url.Parse reads
// it; its query runs from the first '?' past the authority to the first
// '#', and its fragment from that '#' to the end. The URL is cut as
// written, not parsed: one that does not parse is cut all the same.
package urlredact

import (
	"net/url"
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
	if r.Fragment != "" {
		// The fragment as written (EscapedFragment), its values cut;
		// SetFragment would escape the '=' and '&' of the names.
		f := Params(r.EscapedFragment())
		if unescaped, err := url.PathUnescape(f); err == nil {
			r.Fragment, r.RawFragment = unescaped, f
		}
	}
	return Text(r.String())
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
		end := strings.IndexFunc(text[start:], endsURL)
		if end < 0 {
			end = len(text)
		} else {
			end += start
		}
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

// endsURL reports whether r ends a URL in an error's text.
func endsURL(r rune) bool {
	return strings.ContainsRune("\"'`<>\\", r) || unicode.IsSpace(r) || !unicode.IsPrint(r)
}
