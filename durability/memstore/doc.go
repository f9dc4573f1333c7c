// Package memstore is an in-memory [durability.Store] for tests and for
// hosts whose state need not survive the process.
//
// It keeps each actor's events and snapshots in maps behind one lock, copies
// data in and out, and honours the whole Store contract, compaction
// included, so that code tested against it behaves the same on
// [github.com/polyweave/polyweave-go/durability/boltstore]. "Durable" here
// means "held until Close or process exit": Close drops everything.
//
// A Store is safe for concurrent use; its zero value is not usable, create
// one with [New].
package memstore
