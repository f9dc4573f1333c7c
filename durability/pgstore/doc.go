// Package pgstore is the shared [durability.Store] on PostgreSQL (through
// github.com/jackc/pgx/v5): the store for sessions that move between the
// members of a cluster, where every member must read what another wrote.
// For one machine, the embedded durability/boltstore is simpler and faster.
//
// # Schema
//
// [Open] creates what it needs in one PostgreSQL schema (Options.Schema,
// default "polyweave") when it is missing, under an advisory lock so that
// members starting together do not race; when everything is in place (the
// tables, and check_fences as this version defines it) it runs no DDL:
//
//   - meta(key, value): "format" = "1"; Open refuses any other format, naming it.
//   - events(name, idx, data, crc) and snapshots(name, idx, data, crc), keyed
//     by (name, idx): name is the actor name's bytes (bytea: any byte string
//     up to [MaxNameLen] bytes), idx the uint64 index with its top bit
//     flipped so that bigint order is index order, crc the CRC-32C of the
//     row's kind, name, index and data (durability.Checksum).
//   - fences(key, epoch): the fencing tokens of [Store.Claim].
//   - check_fences(keys, epochs): the function every fenced transaction
//     calls first (see Fencing).
//
// A store reads the format once, at Open. One that runs while the schema
// is set up again (dropped, and created by another Open) writes to the new
// tables as it did to the old (its statements run on them as they are),
// whatever format that Open wrote: stop every store of a schema before an
// Open of another version sets it up again. A column whose type an
// operator changes under a running store is met, once per connection, by
// a statement prepared for the old type, which the server refuses (and
// which did nothing): the store drops its connections, and a read, a
// claim or a Salvage refused so runs once more on a fresh one. (The
// statements of writes return no column of the tables.)
//
// # Privileges
//
// To set the schema up, Open needs CREATE on the database (when the schema
// is missing) or on the schema (for a missing table), and ownership of
// check_fences to replace one of another version. To use a store that is
// set up, a role needs only USAGE on the schema, SELECT, INSERT, UPDATE and
// DELETE on its four tables, and EXECUTE on check_fences (PostgreSQL grants
// it to PUBLIC by default). So an owner role can Open once (at deployment,
// and after an upgrade of this package) and application roles hold the
// second set only. An Open that must create something its role may not
// fails naming what it was creating and the role.
//
// Every row read is checked against its checksum; a row changed after it was
// written fails the read with durability.ErrDamaged (a *durability.StoreError
// naming the actor around a *durability.DamageError naming the store, the
// record's kind and its index) and its data is never handed out.
//
// # Salvage
//
// The store never drops a damaged row on its own: a session with one
// fails its recovery until the caller asks for [Store.Salvage] (or
// [Claim.Salvage], fenced), the [durability.Salvager] every store of the
// project has. It keeps the actor's newest intact snapshot and the intact
// events that follow it without a gap, and deletes the actor's other
// rows, in one transaction (REPEATABLE READ) under the caller's context.
// A write of the actor that commits meanwhile is either seen by it or
// comes after it: when a concurrent transaction changed a row Salvage is
// deleting, Salvage runs again (three runs at most) instead of
// overwriting it. It needs no privilege beyond those above.
//
// # Durability and group commit
//
// A write returns once the transaction holding it has committed, so it is as
// durable as the server makes a commit (with PostgreSQL's defaults, fsync'd
// WAL: synchronous_commit=on). Writes go to [Options].Committers committer
// goroutines. A committer takes the first waiting write, waits until every
// other writer inside a write call has queued its write, is in another
// committer's transaction or has returned, adds every write queued (at most
// [Options].MaxBatchSize) and sends them as one
// implicit transaction in one pipelined round trip: at most eight
// statements whatever the number of writes (the first asks for the
// transaction's id: see Timeouts and unknown outcomes), with the rows
// passed as arrays (INSERT … SELECT FROM unnest(…) ON CONFLICT DO
// UPDATE). One committer
// gathers while the others' transactions are in flight, so N concurrent
// writers and two committers settle into two overlapping transactions of
// about N/2 writes each, and a lone writer pays one transaction and no
// added delay (the wait is never for a writer outside a write call). Writes that share a
// transaction were all pending at once, so any order between them is a
// valid one; rows are sorted by key so that two transactions never wait
// for each other in opposite orders. If a batch fails because the server
// refused one of its writes (a superseded claim, say), each write is retried
// alone, so that it fails alone. A failure that is not one write's — the
// connection lost (class 08), the server read-only (25006), shutting down
// or otherwise stopped by its operator (class 57, but for 57014, a
// statement timeout), or its disk full (53100) — fails every write of the
// batch at once, as each would fail alone.
//
// # Failover
//
// A write or claim that the server refuses because it takes no writes
// (SQLSTATE 25006 read_only_sql_transaction: a standby, or a primary
// demoted to one) fails, not for good (durability.IsPermanent is false),
// and the store drops every connection of its pool (pgxpool's Reset;
// those in use when they are returned), once for the whole batch. The next calls connect anew, so
// that once the connection string leads to the new primary (through a
// proxy, a name moved to it, or several hosts with
// target_session_attrs=read-write), they reach it at once instead of
// using connections to the demoted server until they age out.
//
// The error of such a call names the store (its host, database and
// schema), says that the server takes no writes and what to do, with the
// server's own error in its chain; so does that of a call that needed a
// connection the server refused for having as many as it allows
// (SQLSTATE 53300: max_connections, or a CONNECTION LIMIT), and that of
// a call whose context ended while every connection of the store's pool
// ([Options].MaxConns) was in use.
//
// A call that fails because its connection was lost (a restart, a crash,
// sessions ended: see the classes above) drops the pool's connections
// alike, so that the others, dead too, fail no further call. A read
// ([Store.GetEvents], [Store.GetSnapshot], [Store.Epoch]) that fails so
// runs once more, on a fresh connection: it has no side effects and hands
// over nothing before it succeeds, so after a restart no read fails on a
// connection the restart killed. A write's transaction runs once more too,
// on a fresh connection, where that is safe:
//
//   - as it was, when nothing of it reached the server;
//   - else (it may have committed, and the reply was lost) in a
//     transaction that puts each row only where none is stored, locks the
//     rows that are and compares their bytes with the write's: equal bytes
//     mean the write is stored, and it succeeds. Compactions and deletes
//     are idempotent and run again.
//
// A write whose row holds other bytes (an event replaced by one at the
// same index, say) is not run again, which could overwrite bytes written
// since: it fails with [ErrOutcomeUnknown]. A fenced write's fence check
// runs again with it; when the server refuses what one write of the batch
// asks (its claim superseded, say), each write runs again alone, so that
// it fails alone, as on a first run. [Store.Claim] itself is not run
// again after a lost connection (each run raises the epoch); only after
// the server refused it for a table changed under the store (see Schema),
// which raised nothing.
//
// # Timeouts and unknown outcomes
//
// Every statement runs under its caller's context: when it is done, the
// call returns, and the statement's connection is closed (pgx sets its
// deadline), so that a server that fell silent (paused, or behind a
// network that drops packets) holds no caller past its context. Writes
// share transactions (see group commit): a write whose caller's context
// ends the wait before its transaction was sent is withdrawn, and fails
// with the context's error (it is not stored), as does one that Close
// gives up before it was sent (with ErrClosed); one whose transaction was
// sent fails with [ErrOutcomeUnknown] and the context's error, and the
// transaction goes on for the writes that share it, or is cancelled once
// every caller of it gave up. The store copies a write's data when a
// committer takes it, so that a caller that gave up keeps its slices.
//
// [Store.Close], which takes no context, waits at most Options.CloseTimeout
// (default [DefaultCloseTimeout]) for the writes and reads in flight, then
// cancels them; the connections still open then (to a silent server,
// which does not answer their clean close) are closed at once.
//
// An error wrapping ErrOutcomeUnknown (also returned when a write's
// connection was lost after its transaction was sent and running it again
// was not safe or failed) means that the write may or may not have
// committed, unlike the other errors, which mean it did not. A server
// that got the transaction whole commits it even after the connection was
// closed, when it gets to it; so the actor is in doubt until the
// transaction has ended on the server, and the store's reads and writes
// of the actor wait for that: the store's own connection reports the end
// of a transaction that goes on for other writes, and when the store
// closed (or lost) that connection, it asks the server in the background:
// by the transaction's id (txid_status), which the server sends first,
// before the transaction runs, or, when even that answer was lost, by
// the server backend that ran it, named by its pid and its start (in
// pg_stat_activity), which ends the transaction before it exits. A
// backend's pid and start name no other backend; an id names another
// transaction only after a crash of the server, which assigns again the
// ids that nothing durable named. A read or write of an actor in
// doubt whose context ends first fails with ErrOutcomeUnknown, saying that
// a write of the actor is still in doubt; while the server cannot be
// reached to tell, it fails at the next attempt to ask, with
// ErrOutcomeUnknown too, rather than wait for as long as the server is
// away. So, within one Store, a later read tells which. A Claim or a
// Salvage whose outcome is unknown puts its key (Epoch and Claim wait)
// or its actor in doubt alike.
//
// A write whose connection was lost after its transaction was sent, and
// whose caller still waits, is run again (see Failover) only once that
// transaction has ended on the server, which may still be running it:
// run again at once, it would be reported stored while the first run
// could still overwrite a later write. When the server tells that the
// first run did not commit, it runs again as it is; else (it committed,
// or the server cannot tell) it runs again with every row it puts checked
// against the row stored, and the write whose rows hold other bytes fails
// with ErrOutcomeUnknown: after a crash of the server, the transaction
// that committed under the first run's id may be another one. The
// store asks the server whether the first run has ended, each time for
// at most five seconds: when it does not answer (the network died with
// the connection), the write fails at once with ErrOutcomeUnknown, its
// actor in doubt, instead of waiting for as long as the network is away;
// while the server answers that the transaction runs on (it waits on a
// lock, say), the write waits for it, as long as its caller's context
// allows, and holds its committer meanwhile. So the store itself bounds
// no wait for a server that is silent or slow, but for those checks: a
// caller without a deadline waits as long as the server holds its
// statement (a paused server, whose host still answers TCP keepalives,
// holds it for ever). Give every call a deadline. Another
// process does
// not know of the doubt, and its read may show the write absent before
// it commits: across processes, only a new [Store.Claim] of the key
// settles it: it waits for every transaction that passed the older
// claim's fence check, and a later one fails that check.
//
// # Fencing
//
// Two members can believe they host the same session: the old one paused or
// cut off, the new one re-activated it. [Store.Claim] raises a per-key epoch
// and returns a [Claim], a durability.Store whose every transaction first
// checks (holding a share lock on the fence row) that the epoch is still the
// key's newest. After a newer claim has been taken, each write through the
// older one fails with [ErrFenced] and stores nothing; a write that
// committed did so before the newer claim.
//
// Without Claim (two processes writing one session through their Stores,
// or through Claims of different keys), nothing is fenced and nothing
// tells them of each other. Each write commits on its own and none fails
// for the other's: an event or snapshot written at an index already
// stored replaces it, so the last to commit wins, row by row; a snapshot
// of one compacts away (unless KeepHistory) the events and snapshots
// below its index, those the other wrote included; a DeleteEvents of one
// deletes the other's events too. The actor's rows may then hold a
// history neither process wrote, events of both interleaved by index,
// which a recovery replays as it is: every row is whole and passes its
// checksum (it holds the bytes of one write), so no read reports it as
// damaged. A write in doubt (see Timeouts and unknown outcomes) is known
// to its own Store only: the other process's reads and writes do not wait
// for it. Claim every session that two members may host at once.
//
// # Lifecycle
//
// [Open] connects (a pgxpool of [Options].MaxConns connections), checks the
// schema (setting it up when needed) and starts the committers; [Store.Close] stops accepting
// operations, waits for queued writes and running reads, stops the
// committers and closes the pool. Close is idempotent; every operation
// after it fails with [durability.ErrClosed].
//
// For tests, durability/pgstore/pgtest starts a throwaway server.
package pgstore
