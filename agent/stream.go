package agent

import (
	"strconv"
	"strings"
)

// StreamID returns the id of the stream that attempt n (from 1) of
// session runs on: the session id for the first attempt, then
// "<session>#<n>". A '#' or '%' of the session id is written "%23" or
// "%25", so that the streams of different sessions and attempts never
// share an id (session "x" attempt 2 is "x#2", session "x#2" attempt 1
// is "x%232"); an id without them is used as it is. [SessionOf] reads
// the session and attempt back. The frames of [Event].Frame carry it.
func StreamID(session string, attempt int) string {
	id := session
	if needsEscape(session) {
		var b strings.Builder
		for _, r := range session {
			switch r {
			case '#':
				b.WriteString("%23")
			case '%':
				b.WriteString("%25")
			default:
				b.WriteRune(r)
			}
		}
		id = b.String()
	}
	if attempt > 1 {
		id += "#" + strconv.Itoa(attempt)
	}
	return id
}

// needsEscape reports whether session has a '#' or '%': a loop over its
// bytes, which costs a Run less than strings.ContainsAny's set.
func needsEscape(session string) bool {
	for i := 0; i < len(session); i++ {
		if c := session[i]; c == '#' || c == '%' {
			return true
		}
	}
	return false
}

// SessionOf returns the session and attempt of stream, a stream id made
// by [StreamID]: it reads "#<n>" (n from 2, no leading zero) off the
// end as the attempt (else the attempt is 1) and "%23" and "%25" in the
// rest as '#' and '%'. Of an id StreamID does not make it reads what it
// can, leaving the rest as it is: "job#7" is attempt 7 of session "job",
// "50%" session "50%". It allocates only for an id with '%'.
func SessionOf(stream string) (session string, attempt int) {
	// One pass finds both: an inspector reads the session of every frame.
	hash, escaped := -1, false
	for i := 0; i < len(stream); i++ {
		switch stream[i] {
		case '#':
			hash = i
		case '%':
			escaped = true
		}
	}
	session, attempt = stream, 1
	if hash > 0 {
		if n, ok := attemptNumber(stream[hash+1:]); ok {
			session, attempt = stream[:hash], n
		}
	}
	if escaped {
		session = unescape.Replace(session)
	}
	return session, attempt
}

// unescape reads what StreamID escaped.
var unescape = strings.NewReplacer("%23", "#", "%25", "%")

// attemptNumber reads s as an attempt past the first, written as
// StreamID writes it.
func attemptNumber(s string) (int, bool) {
	if s == "" || s[0] == '0' || len(s) > 9 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, n > 1
}
