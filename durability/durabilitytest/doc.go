// Package durabilitytest is the conformance suite for
// [github.com/polyweave/polyweave-go/durability.Store] implementations.
//
// A store's tests call [Run] with a function that opens a fresh store in its
// default configuration:
//
//	func TestConformance(t *testing.T) {
//		durabilitytest.Run(t, func(t *testing.T) durability.Store {
//			s, err := mystore.Open(filepath.Join(t.TempDir(), "db"), nil)
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s
//		})
//	}
//
// The suite checks event order and ranges, overwrites, GetEvents
// callbacks that fail, write or panic (the store stays usable), batches
// of events (PersistEvents: consecutive indexes, never seen in part,
// overflow and empty batches), snapshot recovery and compaction,
// deletes, data ownership, empty and large values, context
// cancellation, many names written and read concurrently, snapshots
// that compact read concurrently (nothing seen goes back, no gap; run it
// with -race), that every method fails with durability.ErrClosed after
// Close, including writes racing with Close, and (the Model case) that
// seeded random sequences of every kind of write leave the store holding
// exactly what a plain model of the contract holds. Goroutine leaks are
// the caller's to check (for example with goleak.VerifyTestMain).
//
// A store with checksums also runs [RunDamagedValues] (damage inside
// stored values is reported, never returned), and [RunSalvage] if it is
// a durability.Salvager; a store kept in one file runs
// [RunDamagedFiles]. A store with a limit on the length of actor names
// runs [RunNameLimit].
package durabilitytest
