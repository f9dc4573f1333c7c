package memstore

import (
	"cmp"
	"context"
	"slices"

	"github.com/polyweave/polyweave-go/durability"
)

var _ durability.Salvager = (*Store)(nil)

// Salvage implements [durability.Salvager]: it keeps name's newest intact
// snapshot and the intact events that follow it without a gap, and drops
// the rest of name's records. In memory, a record fails its check only
// after a stray write in the process (or the Damage test hook); Salvage
// exists so that a host handles a damaged actor the same way whatever
// its store.
func (s *Store) Salvage(ctx context.Context, name string) (durability.Salvaged, error) {
	const op = "salvage"
	var out durability.Salvaged
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, op, name); err != nil {
		return out, err
	}
	l := s.logs[name]
	if l == nil {
		return out, nil
	}
	snaps := make([]uint64, 0, len(l.snapshots))
	for i := range l.snapshots {
		snaps = append(snaps, i)
	}
	slices.SortFunc(snaps, func(a, b uint64) int { return cmp.Compare(b, a) }) // newest first
	for _, i := range snaps {
		if !out.Snapshot {
			if _, err := open(durability.RecordSnapshot, name, i, l.snapshots[i], nil); err == nil {
				out.Snapshot, out.SnapshotIndex = true, i
				continue
			}
		}
		delete(l.snapshots, i)
		out.Dropped++
	}
	out.From = out.SnapshotIndex
	var kept []indexed
	next, run := out.From, true
	for _, e := range l.events.stored() {
		keep := false
		if run && e.index >= out.From {
			if e.index == next {
				if _, err := open(durability.RecordEvent, name, e.index, e.data, nil); err == nil {
					keep = true
					next++
				}
			}
			run = keep // the first damaged or missing event ends the run
		}
		if keep {
			kept = append(kept, e)
		} else {
			out.Dropped++
		}
	}
	l.events.reset()
	for _, e := range kept {
		l.events.put(e.index, e.data)
	}
	out.Events = len(kept)
	if !out.Snapshot && len(kept) == 0 {
		delete(s.logs, name)
	}
	return out, nil
}
