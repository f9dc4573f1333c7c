package quote

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestName: a name up to Max bytes is quoted whole, as %q quotes it; a
// longer one is quoted in part, cut on a rune's boundary, with a marker
// that says what it is, its length and that it was clipped; bytes that
// would wreck a log line (control bytes, invalid UTF-8) are escaped, and
// a name of bytes that start no rune is still quoted in part.
func TestName(t *testing.T) {
	whole := strings.Repeat("n", Max)
	if got, want := Name(whole, "actor name"), fmt.Sprintf("%q", whole); got != want {
		t.Errorf("a name of Max bytes: %.80q…, want it whole", got)
	}
	if got, want := Name("a\nb\x1b[31m\xff", "key"), `"a\nb\x1b[31m\xff"`; got != want {
		t.Errorf("Name of control bytes = %s, want %s", got, want)
	}
	for _, name := range []string{
		strings.Repeat("x", 32<<10),
		strings.Repeat("x", Max-1) + strings.Repeat("é", 100), // a rune across the cut
		strings.Repeat("\x80", 2*Max),                         // no rune starts anywhere
		strings.Repeat("\n", 32<<10),                          // each byte quoted as two
	} {
		got := Name(name, "actor name")
		marker := fmt.Sprintf("…(actor name of %d bytes, clipped)", len(name))
		if len(got) > 4*Max+100 || !strings.HasSuffix(got, marker) || !utf8.ValidString(got) ||
			strings.ContainsAny(got, "\n\x1b") || !strings.HasPrefix(got, `"`) || strings.HasPrefix(got, `""`) {
			t.Errorf("a name of %d bytes: %d bytes %.120q…, want at most %d quoted with %q", len(name), len(got), got, 4*Max+100, marker)
		}
	}
}
