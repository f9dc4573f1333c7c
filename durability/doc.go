// Package durability persists actor state for Polyweave: the event log and
// snapshots behind protoactor's persistence middleware, used by the
// streaming router (pending tool calls survive crashes and restarts) and by
// resumable tool loops.
//
// # Pieces
//
//   - [Store]: the storage interface. Per actor name it keeps events by
//     index and snapshots at an event index, as opaque bytes, each with a
//     checksum over its key and data that every read checks (a damaged
//     record is reported, never returned); every method takes a context
//     and returns an error, always a *[StoreError].
//   - [QuoteName]: an actor name quoted for a message, a log line or a
//     report as a StoreError quotes it (control bytes and invalid UTF-8
//     escaped, clipped past 256 bytes with a marker giving its length), so
//     that naming an actor keeps a line readable and bounded (boltstore
//     takes names of any bytes up to 32 KiB).
//   - [github.com/polyweave/polyweave-go/durability/memstore]: in memory,
//     for tests and hosts whose state may die with the process.
//   - [github.com/polyweave/polyweave-go/durability/boltstore]: one bbolt
//     file, fsync'd before each write returns, with group commit so that
//     many concurrent writers share fsyncs; the default for anything that
//     must survive a process kill.
//   - [github.com/polyweave/polyweave-go/durability/pgstore]: PostgreSQL,
//     shared by the members of a cluster, whose sessions move between
//     them (every member reads what another wrote).
//   - [github.com/polyweave/polyweave-go/durability/durabilitytest]: the
//     conformance suite every Store passes.
//   - [Provider]: the adapter onto protoactor's persistence.Provider,
//     storing messages as google.protobuf.Any and turning store failures
//     into actor failures (a panic with a *StoreError that the actor's
//     supervisor receives as the failure reason), never silent drops.
//
// # Using it from an actor
//
//	store, err := boltstore.Open(path, nil)
//	...
//	provider, err := durability.NewProvider(store, &durability.ProviderOptions{SnapshotInterval: 64})
//	...
//	props := actor.PropsFromProducer(newRouter,
//		actor.WithReceiverMiddleware(persistence.Using(provider)))
//
// The actor embeds persistence.Mixin, persists each event with
// PersistReceive BEFORE applying it (the snapshot protoactor takes inside
// PersistReceive must be the state before the event; see [Provider]),
// answers *persistence.RequestSnapshot with PersistSnapshot(state), and on
// recovery receives its snapshot message, then its events, then
// *persistence.ReplayComplete. Its supervisor tells store failures apart
// with errors.As(reason, &*durability.StoreError) and
// [StoreError.Retryable].
package durability
