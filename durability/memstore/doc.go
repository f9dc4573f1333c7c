// Package memstore is an in-memory [durability.Store] for tests and for
// hosts whose state need not survive the process.
//
// It keeps each actor's events (in a window of consecutive indexes, or a
// map when they are scattered) and snapshots behind one lock, copies data
// in and out (small events into per-actor blocks of memory, so that
// persisting one does not allocate), and honours the whole Store
// contract, compaction included, so that code tested against it behaves
// the same on
// [github.com/polyweave/polyweave-go/durability/boltstore]. "Durable" here
// means "held until Close or process exit": Close drops everything.
// Actor names are limited to [MaxNameLen] bytes, the smallest limit of
// the stores, so that names a test takes are taken by every store.
//
// A Store is safe for concurrent use; its zero value is not usable, create
// one with [New].
package memstore
