package boltstore

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/polyweave/polyweave-go/durability"
)

// TestDamageMessages_QuoteLongNamesInPart: the messages of damage and
// failures found in one actor's data quote its name (up to MaxNameLen
// bytes, any bytes) clipped and escaped, as a *durability.StoreError
// quotes it: a damaged actor of a long name does not flood the log, and
// its control bytes do not reach it raw.
func TestDamageMessages_QuoteLongNamesInPart(t *testing.T) {
	long := strings.Repeat("x", MaxNameLen-10) + "\n\x1b[2J"
	msgs := map[string]string{
		"a page of the actor":   owner{level: 2, top: string(actorsBucket), unit: long}.what(),
		"a checkpoint failure":  (&actorError{long, errors.New("refused")}).Error(),
		"a record of the actor": decodeFailure(t, long),
	}
	marker := fmt.Sprintf("(actor name of %d bytes, clipped)", len(long))
	for what, msg := range msgs {
		if len(msg) > 4*256+300 || !utf8.ValidString(msg) || strings.ContainsAny(msg, "\n\x1b") ||
			!strings.Contains(msg, marker) {
			t.Errorf("%s: %d-byte message %.300q…, want the name clipped and escaped", what, len(msg), msg)
		}
	}
}

// decodeFailure returns the message of decodeFramesWith's error for a
// record of actor name that its callback refuses.
func decodeFailure(t *testing.T, name string) string {
	t.Helper()
	v := encodeRecords([]record{{kind: putEvent, name: name, index: 3, data: []byte("d")}})
	err := decodeFramesWith(v, withSums, func(record, error) error { return durability.ErrDamaged })
	if err == nil {
		t.Fatal("decodeFramesWith: no error from a refusing callback")
	}
	return err.Error()
}
