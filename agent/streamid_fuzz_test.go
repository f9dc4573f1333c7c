package agent_test

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/polyweave/polyweave-go/agent"
)

// streamIDByRunes is StreamID as it looked for '#' and '%' before, with
// strings.ContainsAny: the reference the byte loop must match.
func streamIDByRunes(session string, attempt int) string {
	id := session
	if strings.ContainsAny(session, "#%") {
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

// FuzzStreamID: StreamID escapes every id strings.ContainsAny found a
// '#' or '%' in, and no other (an id of more than eight bytes, where
// ContainsAny uses a set, and of fewer, where it decodes runes; invalid
// UTF-8 included); of a valid session id, SessionOf reads the session
// and attempt back.
func FuzzStreamID(f *testing.F) {
	for _, s := range []string{"s1", "x#2", "x%232", "%", "#", "naïve ☃#9", "long-session-id-without", "long-session-id-with-#",
		"long-session-id-with-%", "\xff#", "\xe2\x98#", "é%é", "0123456#", "01234567#", "012345678#", "\x00#\x7f%\x80"} {
		for _, n := range []int{1, 2, 10} {
			f.Add(s, n)
		}
	}
	f.Fuzz(func(t *testing.T, session string, attempt int) {
		got, want := agent.StreamID(session, attempt), streamIDByRunes(session, attempt)
		if got != want {
			t.Fatalf("StreamID(%q, %d) = %q, want %q as before", session, attempt, got, want)
		}
		if session == "" || !utf8.ValidString(session) || attempt < 1 || attempt > 999_999_999 {
			return // not an id a Run makes
		}
		if s, n := agent.SessionOf(got); s != session || n != attempt {
			t.Fatalf("SessionOf(%q) = %q, %d; want %q, %d", got, s, n, session, attempt)
		}
	})
}
