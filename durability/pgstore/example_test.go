package pgstore_test

import (
	"context"
	"errors"
	"log"

	"github.com/polyweave/polyweave-go/durability/pgstore"
)

// A member claims the session it activates and hands the claim, a fenced
// durability.Store, to the session's durable stages. Once another member
// claims the session, this member's writes fail with ErrFenced.
func ExampleStore_Claim() {
	ctx := context.Background()
	store, err := pgstore.Open(ctx, "postgres://polyweave@db.internal/polyweave", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	claim, err := store.Claim(ctx, "session-42")
	if err != nil {
		log.Fatal(err)
	}
	err = claim.PersistEvent(ctx, "session-42/loop", 0, []byte("step"))
	if errors.Is(err, pgstore.ErrFenced) {
		log.Print("another member took session-42 over: stop this incarnation")
	}
}
