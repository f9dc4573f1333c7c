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

// TestNames: up to MaxNames names are quoted whole, each as Name quotes
// it; of more, the first MaxNames are, followed by how many were left
// out, so that the list's length is bounded whatever the number and
// length of the names.
func TestNames(t *testing.T) {
	if got, want := Names([]string{"a", "b\n"}, "actor name"), `"a", "b\n"`; got != want {
		t.Errorf("Names of two = %s, want %s", got, want)
	}
	if got := Names(nil, "actor name"); got != "" {
		t.Errorf("Names of none = %q, want empty", got)
	}
	many := make([]string, 1000)
	for i := range many {
		many[i] = strings.Repeat(fmt.Sprint(i), 32<<10)
	}
	got := Names(many, "actor name")
	if len(got) > MaxNames*(4*Max+100)+100 || !strings.HasSuffix(got, " and 992 more (1000 actor names in all)") || strings.Count(got, "clipped") != MaxNames {
		t.Errorf("Names of 1000 long names: %d bytes ending %q, want %d clipped names and a count of the rest", len(got), got[max(0, len(got)-80):], MaxNames)
	}
}

// TestName_CutAsClipID: a long name is cut where tools.ClipID cuts one,
// on the last boundary of its characters within Max bytes, a byte that
// is not UTF-8 counting as one: a stray continuation byte at the bound
// is kept (and escaped), a character across it left out whole.
func TestName_CutAsClipID(t *testing.T) {
	for _, c := range []struct{ s, want string }{
		{strings.Repeat("x", Max-1) + "\x80\x80" + strings.Repeat("x", 10), `"` + strings.Repeat("x", Max-1) + `\x80"`},
		{strings.Repeat("x", Max-1) + "é" + strings.Repeat("x", 10), `"` + strings.Repeat("x", Max-1) + `"`},
	} {
		got := Name(c.s, "key")
		if want := c.want + fmt.Sprintf("…(key of %d bytes, clipped)", len(c.s)); got != want {
			t.Errorf("Name of %d bytes = …%s, want …%s", len(c.s), got[max(0, len(got)-60):], want[max(0, len(want)-60):])
		}
	}
}
