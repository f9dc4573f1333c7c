package tools_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/tools"
)

// TestClipID: an id of up to 64 bytes is kept whole; a longer one is cut
// to the whole characters of its first 64 bytes (a byte that is not UTF-8
// counting as one) and followed by its length, and quoting the clip
// escapes no half of a character.
func TestClipID(t *testing.T) {
	x := func(n int) string { return strings.Repeat("x", n) }
	for _, c := range []struct{ id, want string }{
		{"", ""},
		{x(64), x(64)},
		{x(65), x(64) + "…(65 bytes)"},
		{x(63) + "é" + x(10), x(63) + "…(75 bytes)"},
		{x(62) + "😀", x(62) + "…(66 bytes)"},
		{x(63) + "\x80\x80", x(63) + "\x80…(65 bytes)"},
		{strings.Repeat("é", 500), strings.Repeat("é", 32) + "…(1000 bytes)"},
	} {
		if got := tools.ClipID(c.id); got != c.want {
			t.Errorf("ClipID(%.80q) = %q, want %q", c.id, got, c.want)
		}
	}
	if got := fmt.Sprintf("%q", tools.ClipID(x(63)+"€")); strings.Contains(got, `\x`) {
		t.Errorf("quoted clip of a character across the bound = %s, want no escaped half", got)
	}
}
