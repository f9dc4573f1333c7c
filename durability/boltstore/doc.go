// Package boltstore is the embedded on-disk [durability.Store]: one bbolt
// file (go.etcd.io/bbolt) that survives a process kill.
//
// # Durability and group commit
//
// Every write (PersistEvent, PersistEvents, PersistSnapshot, DeleteEvents,
// DeleteSnapshots) returns only after the transaction holding it has been
// committed and fsync'd, so a caller may act on the persisted data as soon as
// the call returns ("persist before you act").
//
// Writes are handed to one committer goroutine. It takes the first waiting
// write, waits until every other writer inside a write call has queued its
// write or returned (writers it has just answered are inside until they
// return, and by then many have come back with their next write), adds
// every write already queued (at most [Options].MaxBatchSize), commits them
// all in one transaction and reports to each writer. While one commit's
// fsync runs, the next writers queue up and share the next commit, so N
// concurrent writers cost about one commit per N writes, while a lone
// writer pays one commit and no added delay. Without the wait, 64 writers
// split into alternating commits of about 32 writes each. A positive
// [Options].MaxBatchDelay bounds the wait; the committer never waits for
// writers not yet inside a write call (a fixed delay, measured, only
// lowered throughput). If a batch's transaction fails, its writes are
// retried one per transaction, so that one bad write fails alone.
//
// # Write-ahead log and checkpoints
//
// A PersistEvents batch is one write: its events are framed one record
// each, next to each other, into the same commit, so they become durable
// together and a kill leaves all of them or none.
//
// A commit appends its writes to a log bucket as one value under the next
// key, so it adds one B+tree entry and dirties the log's last page or two,
// whatever the number of writes or actors involved (one key per write cost
// 11 allocations per event with 64 writers, against 8); writing straight into per-actor buckets dirtied one or two pages
// per actor per commit, and measured 2.7 times slower with 64 writers. The
// log's writes are also applied to an in-memory overlay that reads merge
// with the buckets. When the log holds [Options].CheckpointOps writes or
// [Options].CheckpointBytes bytes, the committer checkpoints: it moves the
// overlay into the per-actor buckets (touching each actor's pages once for
// many writes) and drops the log entries it covers. Done in one
// transaction, a checkpoint made the writes queued behind it wait for the
// whole of it (the longest write measured 21.7 times the median), so it is
// done a piece at a time: the committer freezes the overlay (new writes go
// into a new one), splits it into steps of a few hundred records of one
// actor, and adds steps to each following commit's transaction, where they
// share its fsync; the commit that takes the last step deletes the log
// entries before the freeze and records where the log now starts. Readers
// merge both overlays on top of the buckets meanwhile: applying an overlay
// to buckets that already hold part of it gives the same state, which is
// also why a kill in the middle is safe (Open replays the log from its
// start over the partly updated buckets). Open replays a log left by a
// killed process and checkpoints it whole; so do Close, Compact and
// Salvage.
//
// A bbolt commit costs two fdatasync calls (data pages, then the meta page),
// which bounds a single writer's rate; see the benchmarks in bench/.
//
// [Options].NoSync turns fsync off: persisted data can then be lost or the
// file corrupted by a power loss or OS crash. It exists for benchmarks and
// tests only.
//
// # File layout
//
//   - bucket "polyweave": key "format" = "5", or "6" while the file holds
//     bucket "set-aside"; key "actors" = the directory
//     summary: CRC-32C, then the number of actor buckets (8 bytes) and the
//     sum of their names' checksums (4 bytes). Open compares it with the
//     actors bucket, so an actor bucket lost or renamed by damage is found.
//     Key "logstart" (absent: 0): CRC-32C, then the log's first key (8
//     bytes), set while a checkpoint is under way.
//   - bucket "wal": key = 8-byte big-endian sequence number, from
//     "logstart", one per commit (or more if a commit exceeds bbolt's
//     value limit); the bucket's sequence is the next key. A value larger
//     than 16 KiB is held by a nested bucket under its key, as its one
//     value under the same key, so that later commits do not rewrite its
//     pages. Value = CRC-32C
//     ([durability.Checksum] of kind log entry over the sequence number and
//     the rest), then the commit's records in order, each framed as its
//     length (uvarint) then the record: kind (1 byte: 0 event, 1 snapshot,
//     2 delete events, 3 delete snapshots, 4 lost record), flags (1 byte:
//     bit 0 = the snapshot compacts, bit 1 = the lost record was a
//     snapshot), name length (uvarint), name, index (8 bytes big-endian),
//     the record's CRC-32C (4 bytes: [durability.Checksum] over its kind,
//     name, index and data, as its bucket value will carry it), the
//     CRC-32C of the record's bytes up to here (4 bytes), data.
//   - bucket "actors": one bucket per actor name (the name's bytes are the
//     key: any non-empty name up to [MaxNameLen], 32 KiB), holding buckets "events" and
//     "snapshots" whose keys are indexes as 8-byte big-endian integers (so
//     byte order is index order) and whose values are the record's
//     CRC-32C ([durability.Checksum] over kind, name, index and data; 4
//     bytes big-endian) then its data; and key "summary": CRC-32C, then
//     for events and for snapshots the number of records, the lowest and
//     highest index and the sum of their checksums. An actor bucket left
//     empty by deletes is removed.
//   - bucket "set-aside" (absent until needed): the buckets of actors whose
//     pages Salvage found broken, moved there unread (bbolt cannot free
//     pages it cannot read), one nested bucket per Salvage; Compact drops
//     them. Its pages are broken: a version that does not know the bucket
//     would take them for damage of the file, so a file that holds it is
//     of format "6", which such versions refuse naming the format; Salvage
//     marks the file "6" when it sets a bucket aside, and Compact's copy,
//     without the bucket, is "5" again.
//
// # Failures of the file
//
// A write refused for a reason that repeating it cannot cure fails with an
// error that [durability.IsPermanent] reports, naming the file and why: a
// store opened with [Options].ReadOnly, a file system mounted read-only
// (EROFS), a permission the process lacks, the store's descriptor of the
// file closed or not open for writing, a write over bbolt's largest value
// (about 2 GiB). A full disk or quota (ENOSPC, EDQUOT), a file over a size
// limit (EFBIG) and an I/O error (EIO) of a write are not permanent: room
// made, a limit raised or a device back cures them without anything
// changing in the process, so a caller retries them, within its own bounds.
// Open marks its failures the same way. A commit whose sync (fdatasync)
// failed is the exception: the file's pages in memory may then differ from
// those on disk, so that commit and every later write fail for good until
// the store is closed and opened again (reads go on; what was acknowledged
// is in the log, replayed on open; Close reports the failure when it has a
// checkpoint to make). So does a failed sync of the folder after
// [Store.Compact] renamed its new file over the store's (the rename may
// not survive a crash). A write that must grow the file is classified as one
// that fits it: bbolt reports a failed ftruncate without its errno, so the
// store finds it again from the message, or, on Unix, asks the descriptor
// (fcntl F_GETFL) whether it is still open for writing (a read-only
// descriptor fails ftruncate with EINVAL).
//
// # Damage
//
// Every value is checked when it is read from the file (the writes in the
// log, which reads merge from memory, are the store's own copies, checked
// when Open replays the log, never bytes of the mapped file): a record
// whose checksum does not match, a log with entries missing, a bucket
// whose walk does not match its summary, fail with a [durability.StoreError] wrapping a
// [durability.DamageError] that names the file, the record (kind and
// index; the actor is the StoreError's Name) and, when known, its byte
// offset. Damaged data is never returned. Open checks the file before
// bbolt maps it (size, page alignment, meta pages, the root and freelist
// pages) and runs every bbolt call under a guard that turns bbolt's
// panics and memory faults on the mapped file into such errors.
//
// Damage that belongs to one actor costs that actor alone: a log entry
// whose checksum fails is read record by record, and a record whose
// header checks but whose data does not (so its actor and index are sure)
// is lost; a page of the file below an actor's bucket that Open finds
// broken (a torn or lost sector write: a zeroed page, a page whose
// elements do not fit in it, that gives itself another page's id, or
// whose keys are out of order) makes Open leave that actor's bucket
// unread; a checkpoint that finds an actor's bucket damaged (its summary,
// its keys, pages bbolt trips over) leaves that actor out. Either way the
// actor is quarantined: every read and write of it fails with the damage,
// its intact writes stay in the log (with a record of each lost one, so
// the quarantine outlives a restart), the other actors go on, and
// [Store.Salvage] releases it (an actor whose pages are broken is read
// from the pages that are intact, and its old bucket is set aside, unread,
// in bucket "set-aside" until [Store.Compact] drops it). Damage that
// cannot be attributed makes Open fail, naming the part of the file: a
// page of the root, the log, bucket "polyweave" or the actors bucket
// itself (whose pages list the actors), a page two buckets reach that
// checks from both sides (but two actors' buckets: both are then
// damaged, as which one points to the other's page cannot be told); a
// page that fails the checks of one bucket that reaches it (its keys
// outside what the branch leading to it holds, say: a broken pointer of
// an actor that leads to a page of the log or of another actor) is that
// bucket's damage alone, and the page's owner is read as usual; a log entry that cannot be split into
// records or whose records' headers are damaged, entries missing, the
// directory of actors not matching its summary (an actor bucket lost or
// renamed). A file whose
// newest meta page is damaged is refused unless [Options].MetaFallback
// accepts the previous commit. A file that records no freelist (written
// by bbolt with NoFreelistSync) and has broken pages (an actor's, or a
// bucket set aside) is refused for writing: bbolt would rebuild its
// freelist by reading every bucket, the broken pages too; a read-only
// Open serves its other actors, and [SalvageFile] recovers them into a
// new file.
//
// The records do not depend on the freelist (the page that lists the free
// pages, which bbolt reads only to hand out pages for writing), so a
// damaged freelist page costs nothing to a read-only Open, and Verify
// reports it. A writable Open rebuilds it when the tree is intact: it
// writes a freelist of the pages the walk of the tree did not reach and a
// meta page naming it, as a commit would. When the freelist lists pages
// the tree uses, one of the two is damaged, and which cannot be told,
// whatever else the freelist holds: an entry no freelist holds (a page
// past the end, its own, one twice), or a header giving the page another
// id, shows the freelist damaged, but not that the tree is intact, since
// a pointer to a listed page may be broken as well. (A count or overflow
// that does not fit leaves the list's end unknown: the ids the page
// holds are read, and one the tree uses refuses a writable Open, though
// no actor is quarantined, since past the list's end the page may hold
// ids of an earlier freelist.) If
// those pages are reached from actors' buckets alone, the damage is
// theirs either way (a broken pointer of an actor may lead to a page
// freed since, holding old records of its own whose checksums check:
// an older value of an event or snapshot written again at the same
// index, or records deleted since), so a read-only Open quarantines
// those actors as if their pages were broken, and a writable Open
// refuses the file, every time. The conflict is all that shows such a
// page to Open. Reads compare what they meet with the actor's summary: a
// read of a whole bucket its count and checksums (GetEvents reads a
// thousand events or so per transaction: the pages of a longer read are
// compared together if they all find the same summary and walk the
// bucket one after another, that is if no checkpoint changed the actor's
// events between them and no delete not yet checkpointed hides what the
// next would walk); GetSnapshot the index of the last snapshot and, when
// the bucket holds at most 8 (more are kept with KeepHistory alone), the
// count and checksums of them all; GetEvents from an index or up to one
// the indexes it meets (within the summary's bounds, one after another
// when the bucket holds every index between them, the last one last when
// it reaches the bucket's end). That shows an old page whose records
// were deleted since, or that ends before the bucket does, but not an
// older value of an event written again at the same index, on an old
// page that holds the indexes of the page it stands for, met by a read
// of part of the bucket, or of the last of more than 8 snapshots; and a freelist
// rebuilt from the tree no longer lists the page, so a later Open would
// find nothing (nor would one of a file written with NoFreelistSync).
// [SalvageFile] recovers such a file, reading those actors from
// their pages with the listed pages left out (they may be the actor's
// own, if the freelist is the damaged one: their records are lost with
// them). If another part of the file reaches the listed pages, a
// writable Open refuses the file. It refuses it too when the tree reaches the
// freelist's own page, also from an actor's bucket alone: that actor's
// walk finds a freelist where its page belongs (damage of its own, as
// below), or the page holds the actor's and the freelist is lost, a case
// Open does not tell apart yet; and when pages of the tree are broken as
// well as the freelist (the pages only they lead to would be taken for
// free). The error says so, and
// the polyweave-store command's salvage copies what is intact into a new
// file. [Verify] and the polyweave-store command (cmd/polyweave-store)
// report what a damaged file still holds; [SalvageFile] (the command's
// salvage) recovers what is intact of it into a new file, never touching
// the damaged one.
//
// Files written before checksums (format "2", or "1" with an empty log)
// are read once without checks, with a warning, and rewritten as format
// "5" by Open; a read-only Open reads them unchecked. Format "4" files
// (no log values in nested buckets) and "3" files (no checksums in log
// records either, the log from key 0) are read as they are and marked "5"
// by Open. A format "5" file that holds bucket "set-aside" (written
// before format "6") is marked "6" by Open. Other formats are refused
// with an error naming the format.
//
// PersistSnapshot at index i deletes events and snapshots below i unless
// [Options].KeepHistory is set. Freed pages are reused by later writes; the
// file does not shrink.
//
// # Lifecycle
//
// [Open] checks the file's pages, replays the log and starts the
// committer; [OpenContext] stops the check and the replay, which take
// long for a large file, when its context is done. [Store.Close] stops
// accepting operations, waits for queued writes and running reads, stops the
// committer, checkpoints and closes the file. Close is idempotent, and every
// operation after it fails with [durability.ErrClosed]. A second Open of the
// same file, from this process or another, waits for the file lock up to
// [Options].OpenTimeout: bbolt's flock(2) on Unix systems, and on Windows a
// LockFileEx lock on a byte past the data next to bbolt's own, so that one
// process holds the file there too. [Options].ReadOnly opens under a shared
// lock; it reads a log left by a killed process without checkpointing it.
//
// A Store is safe for concurrent use; its zero value is not usable.
package boltstore
