package durability_test

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
)

// The provider hands back the concrete message types that were persisted.
func ExampleProvider() {
	store := memstore.New(nil)
	defer store.Close()
	provider, err := durability.NewProvider(store, &durability.ProviderOptions{SnapshotInterval: 10})
	if err != nil {
		fmt.Println(err)
		return
	}
	state := provider.GetState()
	state.PersistEvent("router-1", 0, wrapperspb.String(`{"path":`))
	state.PersistEvent("router-1", 1, wrapperspb.String(`"a.txt"}`))
	state.GetEvents("router-1", 0, 0, func(e any) {
		fmt.Printf("%T %q\n", e, e.(*wrapperspb.StringValue).GetValue())
	})
	// Output:
	// *wrapperspb.StringValue "{\"path\":"
	// *wrapperspb.StringValue "\"a.txt\"}"
}

// A failing store makes the provider panic with a *StoreError; inside an
// actor, protoactor delivers it to the supervisor as the failure reason.
func ExampleProvider_failure() {
	store := memstore.New(nil)
	provider, _ := durability.NewProvider(store, nil)
	store.Close()

	defer func() {
		reason := recover()
		var se *durability.StoreError
		if err, ok := reason.(error); ok && errors.As(err, &se) {
			fmt.Println(se.Op, se.Name, errors.Is(se, durability.ErrClosed), se.Retryable())
		}
	}()
	provider.PersistEvent("router-1", 0, wrapperspb.String("chunk"))
	// Output:
	// persist event router-1 true false
}

// A caller that retries a store's failures stops at once on one that
// repeating cannot cure.
func ExampleIsPermanent() {
	refused := durability.Permanent(errors.New("permission denied for table events"))
	for _, err := range []error{
		&durability.StoreError{Op: durability.OpPersistEvent, Name: "s", Err: refused},
		&durability.StoreError{Op: durability.OpPersistEvent, Name: "s", Err: durability.ErrClosed},
		&durability.StoreError{Op: durability.OpPersistEvent, Name: "s", Err: errors.New("connection reset by peer")},
	} {
		fmt.Println(durability.IsPermanent(err), err)
	}
	// Output:
	// true durability: persist event "s": permission denied for table events
	// true durability: persist event "s": store closed
	// false durability: persist event "s": connection reset by peer
}
