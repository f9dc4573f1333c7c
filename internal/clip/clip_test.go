package clip

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// runes returns the characters s decodes to, a byte that is not UTF-8
// counting as one (utf8.RuneError of width 1).
func runes(s string) []string {
	var out []string
	for len(s) > 0 {
		_, w := utf8.DecodeRuneInString(s)
		out = append(out, s[:w])
		s = s[w:]
	}
	return out
}

// check asserts what Prefix promises of s and n: s whole when it fits;
// else a prefix of at most n bytes made of whole characters of s (so that
// it decodes to the first characters of s, none cut in two), the longest
// such, and one that %q quotes into whole escapes.
func check(t *testing.T, s string, n int) {
	t.Helper()
	p, clipped := Prefix(s, n)
	if len(s) <= n {
		if clipped || p != s {
			t.Fatalf("Prefix(%q, %d) = %q, %v; want it whole", s, n, p, clipped)
		}
		return
	}
	if !clipped || len(p) > n || !strings.HasPrefix(s, p) {
		t.Fatalf("Prefix(%.80q, %d) = %q, %v; want a clipped prefix of at most %d bytes", s, n, p, clipped, n)
	}
	whole := runes(s)
	got := runes(p)
	for i, r := range got {
		if r != whole[i] {
			t.Fatalf("Prefix(%.80q, %d) = %q: its character %d is %q, %q in s: a character was cut", s, n, p, i, r, whole[i])
		}
	}
	if next := whole[len(got)]; len(p)+len(next) <= n {
		t.Fatalf("Prefix(%.80q, %d) = %q: the next character %q fits too", s, n, p, next)
	}
	q := fmt.Sprintf("%q", p)
	if back, err := strconv.Unquote(q); err != nil || back != p || !utf8.ValidString(q) {
		t.Fatalf("%%q of Prefix(%.80q, %d) = %s, which does not unquote to the prefix (%v)", s, n, q, err)
	}
}

// TestPrefix: a name is cut on a character's boundary, a character
// across the bound left out whole, a byte that is not UTF-8 counting as
// one character, so that neither a clip nor its quoted form ends in half
// a character or half an escape.
func TestPrefix(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"", 4, ""},
		{"abcd", 4, "abcd"},
		{"abcde", 4, "abcd"},
		{"abcé", 4, "abc"},            // é is two bytes across the bound
		{"ab€x", 4, "ab"},             // € is three
		{"a😀", 4, "a"},                // 😀 is four
		{"😀x", 4, "😀"},                // ends exactly on the bound
		{"abc\x80\x80", 4, "abc\x80"}, // a stray continuation byte is one character
		{"\x80\x80\x80\x80\x80\x80", 4, "\x80\x80\x80\x80"},
		{"abc\xe2\x82", 4, "abc\xe2"}, // a character's start without its end is one byte
		{"ab\xe2\x82\xac", 4, "ab"},
		{"a\nb\x1b[31m", 4, "a\nb\x1b"},
	} {
		check(t, c.s, c.n)
		if got, clipped := Prefix(c.s, c.n); got != c.want || clipped != (len(c.s) > c.n) {
			t.Errorf("Prefix(%q, %d) = %q, %v; want %q", c.s, c.n, got, clipped, c.want)
		}
	}
	long := strings.Repeat("é", 32<<10)
	if p, _ := Prefix(long, 255); len(p) != 254 {
		t.Errorf("Prefix of %d bytes of é to 255: %d bytes, want 254", len(long), len(p))
	}
}

// FuzzPrefix checks Prefix's promises on any bytes and bound.
func FuzzPrefix(f *testing.F) {
	for _, s := range []string{"", "abcé", "a😀b", "\x80\xff\xe2\x82", "a\nb\x1b[31m\xff", strings.Repeat("€", 30)} {
		for _, n := range []int{0, 1, 3, 4, 64} {
			f.Add(s, n)
		}
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 {
			n = -(n + 1)
		}
		check(t, s, n%300)
	})
}
