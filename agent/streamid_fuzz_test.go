package agent_test

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/polyweave/polyweave-go/agent"
)

// FuzzStreamID: StreamID escapes a session id exactly when
// strings.ContainsAny, which it looked for '#' and '%' with before,
// finds one in it (an id of more than eight bytes, where ContainsAny
// uses a set, and of fewer, where it decodes runes; invalid UTF-8
// included): an id escaped is never the id itself, as '#' and '%' are
// written in three bytes. Attempts past the first add "#<n>"; of a valid
// session id, SessionOf reads the session and attempt back.
func FuzzStreamID(f *testing.F) {
	for _, s := range []string{"s1", "x#2", "x%232", "%", "#", "naïve ☃#9", "long-session-id-without", "long-session-id-with-#",
		"long-session-id-with-%", "\xff#", "\xe2\x98#", "é%é", "0123456#", "01234567#", "012345678#", "\x00#\x7f%\x80"} {
		for _, n := range []int{1, 2, 10} {
			f.Add(s, n)
		}
	}
	f.Fuzz(func(t *testing.T, session string, attempt int) {
		first := agent.StreamID(session, 1)
		if escaped, want := first != session, strings.ContainsAny(session, "#%"); escaped != want {
			t.Fatalf("StreamID(%q, 1) = %q: escaped %v, want %v as before", session, first, escaped, want)
		}
		want := first
		if attempt > 1 {
			want += "#" + strconv.Itoa(attempt)
		}
		got := agent.StreamID(session, attempt)
		if got != want {
			t.Fatalf("StreamID(%q, %d) = %q, want %q", session, attempt, got, want)
		}
		if session == "" || !utf8.ValidString(session) || attempt < 1 || attempt > 999_999_999 {
			return // not an id a Run makes
		}
		if s, n := agent.SessionOf(got); s != session || n != attempt {
			t.Fatalf("SessionOf(%q) = %q, %d; want %q, %d", got, s, n, session, attempt)
		}
	})
}
