package memstore_test

import (
	"context"
	"fmt"

	"github.com/polyweave/polyweave-go/durability/memstore"
)

// Recovery reads the newest snapshot, then the events from its index on.
func Example() {
	ctx := context.Background()
	s := memstore.New(nil)
	defer s.Close()

	for i, e := range []string{"a", "b", "c"} {
		_ = s.PersistEvent(ctx, "counter", uint64(i), []byte(e))
	}
	// The snapshot at index 2 is the state after events 0 and 1; taking it
	// compacts those two events away.
	_ = s.PersistSnapshot(ctx, "counter", 2, []byte("ab"))
	_ = s.PersistEvent(ctx, "counter", 3, []byte("d"))

	snap, ok, _ := s.GetSnapshot(ctx, "counter")
	fmt.Printf("snapshot %v at %d: %s\n", ok, snap.Index, snap.Data)
	_ = s.GetEvents(ctx, "counter", snap.Index, 0, func(i uint64, data []byte) error {
		fmt.Printf("event %d: %s\n", i, data)
		return nil
	})
	// Output:
	// snapshot true at 2: ab
	// event 2: c
	// event 3: d
}
