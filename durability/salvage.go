package durability

import "context"

// Salvaged says what a store's Salvage kept of an actor (see [Salvager]).
type Salvaged struct {
	Snapshot      bool   // an intact snapshot was kept
	SnapshotIndex uint64 // its index
	Events        int    // intact events kept, at indexes From, From+1, ...
	From          uint64 // SnapshotIndex, or 0 without a snapshot
	Dropped       int    // records deleted, each once: a damaged one too, wherever the store kept it
}

// Salvager is implemented by stores that can make a damaged actor
// recoverable again by dropping state: Salvage keeps the actor's newest
// intact snapshot and the intact events that follow it without a gap
// (from index 0 if no snapshot is intact), and deletes everything else of
// the actor: damaged records, the events after the first damaged or
// missing one, older snapshots and the events below the kept snapshot.
// Recovery then resumes from the last intact snapshot. What is dropped is
// lost, so a store never does this on its own: the caller asks for it,
// after reading the damage. An actor without damage loses only what
// compaction would drop (older snapshots, events below the newest), as
// long as its events run without a gap from its newest snapshot (from 0
// without one); events after a gap (left by deletes that no snapshot
// covers) cannot be recovered from, and Salvage drops them too.
type Salvager interface {
	Salvage(ctx context.Context, name string) (Salvaged, error)
}
