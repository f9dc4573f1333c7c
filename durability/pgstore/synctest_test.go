package pgstore_test

import (
	"context"
	"testing"
	"testing/synctest"
)

// TestStore_WritesInAndOutOfSynctestBubbles: a host testing its code with
// testing/synctest may open a store inside a bubble and another outside.
// Channels made inside a bubble belong to it, and a receive on one from
// outside is a fatal error of the whole process, so nothing a write
// waits on may be shared between stores.
func TestStore_WritesInAndOutOfSynctestBubbles(t *testing.T) {
	persist := func(t *testing.T) {
		s := open(t, nil)
		defer s.Close()
		for i := range 16 {
			if err := s.PersistEvent(context.Background(), "actor", uint64(i+1), []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 3 {
		synctest.Test(t, persist)
		persist(t)
	}
}
