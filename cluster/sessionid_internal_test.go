package cluster

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/tools"
)

// TestCheckSessionID_QuotesWholeCharacters: a session id too long is
// refused with an error that quotes it clipped at a character boundary
// (%q quotes the bytes of a cut character as escapes) and says its
// length; the bound is the one of a tool loop's session, which a
// member runs the session as.
func TestCheckSessionID_QuotesWholeCharacters(t *testing.T) {
	if MaxSessionIDLen != tools.MaxSessionIDLen {
		t.Errorf("MaxSessionIDLen is %d, tools.MaxSessionIDLen %d", MaxSessionIDLen, tools.MaxSessionIDLen)
	}
	id := "a" + strings.Repeat("é", MaxSessionIDLen/2) // odd: a cut at a byte count falls inside an é
	err := checkSessionID(id)
	if !errors.Is(err, durability.ErrInvalidName) {
		t.Fatalf("an id of %d bytes: %v, want durability.ErrInvalidName", len(id), err)
	}
	msg := err.Error()
	if len(msg) > 400 || !strings.Contains(msg, strconv.Itoa(len(id))) || !utf8.ValidString(msg) || strings.Contains(msg, `\x`) {
		t.Errorf("%q: want it short, saying %d, with whole characters", msg, len(id))
	}
	if err := checkSessionID(strings.Repeat("é", MaxSessionIDLen/2)); err != nil {
		t.Errorf("an id of %d bytes: %v", MaxSessionIDLen/2*2, err)
	}
}
