package durability_test

import (
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/polyweave/polyweave-go/durability/memstore"
)

// TestProvider_PersistEventAllocs holds the adapter's hot path to its
// allocation budget: the encoded Any buffer, and the store's own copy.
func TestProvider_PersistEventAllocs(t *testing.T) {
	s := memstore.New(nil)
	defer s.Close()
	p := newProvider(t, s, nil)
	msg := wrapperspb.String(`{"path":"a.txt","content":"some argument chunk of a tool call"}`)
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		p.PersistEvent("router", i%64, msg) // overwrite: no map growth
		i++
	})
	if allocs > 2 {
		t.Errorf("PersistEvent through the provider allocates %.1f times per call, budget 2", allocs)
	}
}
