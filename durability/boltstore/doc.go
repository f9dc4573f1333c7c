// Package boltstore is the embedded on-disk [durability.Store]: one bbolt
// file (go.etcd.io/bbolt) that survives a process kill.
//
// # Durability and group commit
//
// Every write (PersistEvent, PersistSnapshot, DeleteEvents,
// DeleteSnapshots) returns only after the transaction holding it has been
// committed and fsync'd, so a caller may act on the persisted data as soon as
// the call returns ("persist before you act").
//
// Writes are handed to one committer goroutine. It takes the first waiting
// write, adds every write already queued (at most [Options].MaxBatchSize),
// applies them all in one read-write transaction and reports to each
// writer. While one commit's fsync runs, the next writers queue up and share
// the next commit, so N concurrent writers cost about one commit per N
// writes, while a lone writer pays a single commit and no added delay. A
// positive [Options].MaxBatchDelay makes the committer wait for more
// writes before committing instead; it rarely helps because concurrency
// already fills batches. If a batch's transaction fails, its writes are
// retried one per transaction, so that one bad write fails alone.
//
// A bbolt commit costs two fdatasync calls (data pages, then the meta page),
// which bounds a single writer's rate; see the benchmarks in bench/.
//
// [Options].NoSync turns fsync off: persisted data can then be lost or the
// file corrupted by a crash. It exists for benchmarks and tests only.
//
// # File layout
//
// Bucket "polyweave" holds key "format" (currently "1"; Open rejects other
// versions). Bucket "actors" holds one bucket per actor name (the name's
// bytes are the bucket key, so any non-empty name up to bbolt's key limit of
// 32 KiB is allowed), each holding bucket "events" and bucket "snapshots",
// whose keys are indexes as 8-byte big-endian integers (so byte order is
// index order) and whose values are the data as given.
//
// PersistSnapshot at index i deletes events and snapshots below i in the
// same transaction unless [Options].KeepHistory is set. Freed pages are
// reused by later writes; the file does not shrink.
//
// # Lifecycle
//
// [Open] starts the committer; [Store.Close] stops accepting operations,
// waits for queued writes and running reads, stops the committer and closes
// the file. Close is idempotent, and every operation after it fails with
// [durability.ErrClosed]. A second Open of the same file, from this process
// or another, waits for bbolt's file lock up to [Options].OpenTimeout.
//
// A Store is safe for concurrent use; its zero value is not usable.
package boltstore
