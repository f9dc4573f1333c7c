// Package clip shortens a long name (a session's or a call's id, a
// store's key) for an error message, so that a message stays one line of
// bounded length whatever the name. Its callers choose the bound, whether
// the name is quoted and how the clip is marked; clip only chooses where
// to cut.
package clip

// Prefix returns s whole if it is at most n bytes long; otherwise the
// longest prefix of s of at most n bytes made of whole characters of s,
// and true. It never cuts a UTF-8 character in two: %q would quote the
// bytes of its half as escapes, so a clip would hold bytes the name does
// not. A byte that is not UTF-8 counts as one character, as %q escapes
// it.
func Prefix(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	cut := 0
	for i := range s {
		if i > n {
			break
		}
		cut = i
	}
	return s[:cut], true
}
