// Package quote quotes the keys of the durability stores (actor names,
// bucket keys) for error messages: a key may be long (32 KiB in a bbolt
// file) and hold any bytes, and a message must stay one readable line of
// bounded length.
package quote

import (
	"fmt"
	"strings"

	"github.com/polyweave/polyweave-go/internal/clip"
)

// Max is the length in bytes of the longest key [Name] quotes whole.
const Max = 256

// Name returns s quoted as %q quotes it (control bytes and invalid UTF-8
// escaped), whole up to Max bytes. A longer s is quoted in part, the
// whole characters of its first Max bytes (a byte that is not UTF-8
// counting as one, as tools.ClipID cuts an id), followed by a marker
// that says what s is, its whole length and that it was clipped:
// "…(actor name of 32768 bytes, clipped)".
func Name(s, what string) string {
	p, clipped := clip.Prefix(s, Max)
	if !clipped {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q…(%s of %d bytes, clipped)", p, what, len(s))
}

// MaxNames is how many names [Names] quotes.
const MaxNames = 8

// Names returns names quoted with [Name], comma-separated, at most
// MaxNames of them, followed, when there are more, by how many were
// left out: a list of many long names stays one line of bounded length.
func Names(names []string, what string) string {
	var b strings.Builder
	for i, n := range names[:min(len(names), MaxNames)] {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(Name(n, what))
	}
	if len(names) > MaxNames {
		fmt.Fprintf(&b, " and %d more (%d %ss in all)", len(names)-MaxNames, len(names), what)
	}
	return b.String()
}
