package boltstore

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
)

// TestStore_WritesInAndOutOfSynctestBubbles: a host testing its code with
// testing/synctest may open a store inside a bubble and another outside
// (or in another bubble). Channels made inside a bubble belong to it, and
// a receive on one from outside is a fatal error of the whole process, so
// nothing a write waits on may be shared between stores.
func TestStore_WritesInAndOutOfSynctestBubbles(t *testing.T) {
	persist := func(t *testing.T) {
		s, _ := openTemp(t, nil)
		defer s.Close()
		for i := range 64 {
			if err := s.PersistEvent(context.Background(), "actor", uint64(i+1), []byte(fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.PersistEvents(context.Background(), "batch", 1, [][]byte{[]byte("a"), []byte("b")}); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 {
		synctest.Test(t, persist)
		persist(t)
	}
}
