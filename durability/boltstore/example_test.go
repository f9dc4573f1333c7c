package boltstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/polyweave/polyweave-go/durability/boltstore"
)

// Data persisted before Close is there after Open.
func Example() {
	dir, _ := os.MkdirTemp("", "boltstore-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "state.db")
	ctx := context.Background()

	s, err := boltstore.Open(path, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = s.PersistEvent(ctx, "router-1", 0, []byte(`{"chunk":"{\"pa"}`))
	_ = s.PersistEvent(ctx, "router-1", 1, []byte(`{"chunk":"th\":1}"}`))
	_ = s.Close()

	s, err = boltstore.Open(path, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	_ = s.GetEvents(ctx, "router-1", 0, 0, func(i uint64, data []byte) error {
		fmt.Printf("%d %s\n", i, data)
		return nil
	})
	// Output:
	// 0 {"chunk":"{\"pa"}
	// 1 {"chunk":"th\":1}"}
}
