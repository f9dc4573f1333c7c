package cluster

import (
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
)

// TestFit_ClipsErrorsKeepsAnswersOut: a status over the frame limit fits
// it after fit: an answer is replaced by a refusal of cause
// causeTooLarge, any other status keeps its state and cause with its
// error clipped, also when JSON escapes every byte of it into six, and
// never in the middle of a character.
func TestFit_ClipsErrorsKeepsAnswersOut(t *testing.T) {
	const limit = 4 << 10
	m := &Member{maxFrame: limit}
	for _, tc := range []struct {
		name string
		st   status
	}{
		{"failed", status{State: stateFailed, Error: strings.Repeat("why ", limit)}},
		{"escaped", status{State: stateFailed, Error: strings.Repeat("<\x01", limit)}},
		{"runes", status{State: stateFailed, Error: strings.Repeat("é€😀", limit)}},
		{"refused", status{State: stateRefused, Cause: causeStoreRefused, Error: strings.Repeat("no ", limit)}},
		{"retry", status{State: stateRetry, Error: strings.Repeat("again ", limit)}},
	} {
		got := m.fit("s", tc.st)
		if n := proto.Size(statusFrame("s", got)); n > limit {
			t.Errorf("%s: fit's status is %d bytes, over the limit of %d", tc.name, n, limit)
		}
		if got.State != tc.st.State || got.Cause != tc.st.Cause {
			t.Errorf("%s: fit's status is %s (cause %q), want %s (cause %q)", tc.name, got.State, got.Cause, tc.st.State, tc.st.Cause)
		}
		if !utf8.ValidString(got.Error) || !strings.Contains(got.Error, "bytes in all") || !strings.HasPrefix(got.Error, tc.st.Error[:8]) {
			t.Errorf("%s: fit's error %.100q...: want the beginning of the error, valid UTF-8, with a note of its length", tc.name, got.Error)
		}
	}
	small := status{State: stateFailed, Error: "short"}
	if got := m.fit("s", small); got != small {
		t.Errorf("fit of a status within the limit: %+v, want it unchanged", got)
	}
	answer := status{State: stateDone, Text: strings.Repeat("x", limit)}
	if got := m.fit("s", answer); got.State != stateRefused || got.Cause != causeTooLarge {
		t.Errorf("fit of an answer over the limit: %s (cause %q), want refused, cause %q", got.State, got.Cause, causeTooLarge)
	}
}
