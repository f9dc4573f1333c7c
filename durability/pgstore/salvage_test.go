package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/durabilitytest"
	"github.com/polyweave/polyweave-go/durability/pgstore"
)

// A session with a damaged row can be resumed from its last intact
// snapshot when the caller asks for it, as with the other stores: the
// store and its fenced view are Salvagers.
func TestStore_IsASalvager(t *testing.T) {
	if _, ok := any((*pgstore.Store)(nil)).(durability.Salvager); !ok {
		t.Error("*pgstore.Store does not implement durability.Salvager: a damaged session cannot be resumed from its last intact snapshot")
	}
	if _, ok := any((*pgstore.Claim)(nil)).(durability.Salvager); !ok {
		t.Error("*pgstore.Claim does not implement durability.Salvager")
	}
}

// The Salvager conformance case, on the store and through a claim, with
// a row damaged by SQL on the server.
func TestStore_SalvageConformance(t *testing.T) {
	t.Parallel()
	var schema string
	durabilitytest.RunSalvage(t, func(t *testing.T) durability.Store {
		s := open(t, nil)
		schema = s.Schema()
		return s
	}, damageRow(&schema))
}

func TestClaim_SalvageConformance(t *testing.T) {
	t.Parallel()
	var schema string
	durabilitytest.RunSalvage(t, func(t *testing.T) durability.Store {
		s := open(t, nil)
		t.Cleanup(func() { s.Close() })
		schema = s.Schema()
		c, err := s.Claim(t.Context(), "session")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}, damageRow(&schema))
}

// biased is the SQL for index i as the tables store it.
func biased(i uint64) int64 { return int64(i ^ (1 << 63)) }

// events returns name's events from from on, as "index:data" strings, or
// the read's error.
func events(t *testing.T, s durability.Store, name string, from uint64) ([]string, error) {
	t.Helper()
	var got []string
	err := s.GetEvents(t.Context(), name, from, 0, func(i uint64, d []byte) error {
		got = append(got, fmt.Sprintf("%d:%s", i, d))
		return nil
	})
	return got, err
}

// TestStore_SalvageCases: what Salvage keeps and drops, with the rows
// damaged or removed by SQL on the server, and what reads back after.
// The store keeps its history, so that older snapshots and events below
// the newest are there to fall back on (or to drop).
func TestStore_SalvageCases(t *testing.T) {
	t.Parallel()
	type damage struct {
		table string // "events" or "snapshots"
		index uint64
		drop  bool // delete the row instead of damaging it
	}
	for _, c := range []struct {
		name      string
		events    int      // events 0 .. events-1
		snapshots []uint64 // snapshots at these indexes
		damage    []damage
		want      durability.Salvaged
		wantSnap  string   // the snapshot read back after, "" for none
		wantEv    []string // events read back after, from 0
	}{{
		name: "intact: what compaction would drop", events: 6, snapshots: []uint64{2, 4},
		want:     durability.Salvaged{Snapshot: true, SnapshotIndex: 4, From: 4, Events: 2, Dropped: 5},
		wantSnap: "4:snap 4", wantEv: []string{"4:event 4", "5:event 5"},
	}, {
		name: "newest snapshot damaged: the older one", events: 6, snapshots: []uint64{2, 4},
		damage:   []damage{{"snapshots", 4, false}},
		want:     durability.Salvaged{Snapshot: true, SnapshotIndex: 2, From: 2, Events: 4, Dropped: 3},
		wantSnap: "2:snap 2", wantEv: []string{"2:event 2", "3:event 3", "4:event 4", "5:event 5"},
	}, {
		name: "no snapshot: events from 0 to the damaged one", events: 5,
		damage: []damage{{"events", 2, false}},
		want:   durability.Salvaged{Events: 2, Dropped: 3},
		wantEv: []string{"0:event 0", "1:event 1"},
	}, {
		name: "a gap ends the run", events: 6, snapshots: []uint64{1},
		damage:   []damage{{"events", 3, true}},
		want:     durability.Salvaged{Snapshot: true, SnapshotIndex: 1, From: 1, Events: 2, Dropped: 3},
		wantSnap: "1:snap 1", wantEv: []string{"1:event 1", "2:event 2"},
	}, {
		name: "the snapshot's own event damaged: the snapshot alone", events: 4, snapshots: []uint64{2},
		damage:   []damage{{"events", 2, false}},
		want:     durability.Salvaged{Snapshot: true, SnapshotIndex: 2, From: 2, Dropped: 4},
		wantSnap: "2:snap 2",
	}, {
		name: "nothing intact: nothing kept", events: 3, snapshots: []uint64{1},
		damage: []damage{{"snapshots", 1, false}, {"events", 0, false}},
		want:   durability.Salvaged{Dropped: 4},
	}, {
		name: "unknown actor",
	}} {
		t.Run(c.name, func(t *testing.T) {
			s := open(t, &pgstore.Options{KeepHistory: true})
			defer s.Close()
			ctx := t.Context()
			const name, other = "actor", "actor-other"
			for _, n := range []string{name, other} {
				for i := range uint64(c.events) {
					if err := s.PersistEvent(ctx, n, i, fmt.Appendf(nil, "event %d", i)); err != nil {
						t.Fatal(err)
					}
				}
				for _, i := range c.snapshots {
					if err := s.PersistSnapshot(ctx, n, i, fmt.Appendf(nil, "snap %d", i)); err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, d := range c.damage {
				stmt := "UPDATE %s.%s SET data = set_byte(data, 0, get_byte(data, 0) # 4) WHERE name = $1 AND idx = $2"
				if d.drop {
					stmt = "DELETE FROM %s.%s WHERE name = $1 AND idx = $2"
				}
				sql(t, fmt.Sprintf(stmt, s.Schema(), d.table), []byte(name), biased(d.index))
			}
			got, err := s.Salvage(ctx, name)
			if err != nil || got != c.want {
				t.Fatalf("Salvage = %+v, %v; want %+v", got, err, c.want)
			}
			snap, ok, err := s.GetSnapshot(ctx, name)
			if gotSnap := fmt.Sprintf("%d:%s", snap.Index, snap.Data); err != nil || ok != (c.wantSnap != "") || ok && gotSnap != c.wantSnap {
				t.Errorf("snapshot after Salvage: %q, %v, %v; want %q", gotSnap, ok, err, c.wantSnap)
			}
			if ev, err := events(t, s, name, 0); err != nil || strings.Join(ev, ",") != strings.Join(c.wantEv, ",") {
				t.Errorf("events after Salvage: %q, %v; want %q", ev, err, c.wantEv)
			}
			// The other actor, whose name name is a prefix of, is untouched.
			if ev, err := events(t, s, other, 0); err != nil || len(ev) != c.events {
				t.Errorf("the other actor's events after Salvage: %q, %v", ev, err)
			}
			// Salvage again: nothing more to drop.
			again, err := s.Salvage(ctx, name)
			if want := (durability.Salvaged{Snapshot: c.want.Snapshot, SnapshotIndex: c.want.SnapshotIndex, From: c.want.From, Events: c.want.Events}); err != nil || again != want {
				t.Errorf("Salvage again = %+v, %v; want %+v", again, err, want)
			}
		})
	}
}

// A stale incarnation cannot salvage: once a newer claim of its key was
// taken, its Salvage fails with ErrFenced and drops nothing; the current
// one's succeeds.
func TestClaim_SalvageFenced(t *testing.T) {
	t.Parallel()
	s := open(t, nil)
	defer s.Close()
	ctx := t.Context()
	old, err := s.Claim(ctx, "session")
	if err != nil {
		t.Fatal(err)
	}
	for i := range uint64(4) {
		if err := old.PersistEvent(ctx, "loop", i, fmt.Appendf(nil, "event %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	sql(t, fmt.Sprintf("UPDATE %s.events SET data = set_byte(data, 0, get_byte(data, 0) # 4) WHERE name = $1 AND idx = $2", s.Schema()),
		[]byte("loop"), biased(2))
	cur, err := s.Claim(ctx, "session")
	if err != nil {
		t.Fatal(err)
	}
	_, err = old.Salvage(ctx, "loop")
	if se := checkCause(t, err, pgstore.ErrFenced); se.Op != "salvage" || se.Name != "loop" {
		t.Errorf("fenced Salvage: %v, want a StoreError of op salvage naming the actor", err)
	}
	if _, err := events(t, s, "loop", 0); !errors.Is(err, durability.ErrDamaged) {
		t.Fatalf("after a fenced Salvage the damaged row reads: %v, want it still there, damaged", err)
	}
	got, err := cur.Salvage(ctx, "loop")
	if want := (durability.Salvaged{Events: 2, Dropped: 2}); err != nil || got != want {
		t.Fatalf("Salvage through the current claim = %+v, %v; want %+v", got, err, want)
	}
	if ev, err := events(t, s, "loop", 0); err != nil || strings.Join(ev, ",") != "0:event 0,1:event 1" {
		t.Errorf("after Salvage: %q, %v", ev, err)
	}
	cur.Close()
	if _, err := cur.Salvage(ctx, "loop"); !errors.Is(err, durability.ErrClosed) {
		t.Errorf("Salvage through a closed claim: %v, want ErrClosed", err)
	}
}

// Salvage runs under its caller's context: one held up by a lock on the
// server returns when the context is done, and drops nothing.
func TestStore_SalvageBoundedByContext(t *testing.T) {
	t.Parallel()
	s := open(t, nil)
	defer s.Close()
	ctx := t.Context()
	for i := range uint64(3) {
		if err := s.PersistEvent(ctx, "a", i, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	sql(t, fmt.Sprintf("UPDATE %s.events SET data = 'y' WHERE name = $1 AND idx = $2", s.Schema()), []byte("a"), biased(1))
	locker, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(context.WithoutCancel(ctx))
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, fmt.Sprintf("LOCK TABLE %s.events IN ACCESS EXCLUSIVE MODE", s.Schema())); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := s.Salvage(sctx, "a")
		errc <- err
	}()
	waitLocked(t, "SELECT", s.Schema()) // the salvage waits for the lock
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("Salvage cut off by its context: %v, want context.Canceled", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := events(t, s, "a", 0); !errors.Is(err, durability.ErrDamaged) {
		t.Fatalf("after a Salvage cut off: %v, want the damaged row still there", err)
	}
	if got, err := s.Salvage(ctx, "a"); err != nil || got.Events != 1 || got.Dropped != 2 {
		t.Errorf("Salvage = %+v, %v; want one event kept and two dropped", got, err)
	}
}

// A write that changes a row Salvage would drop, committed while Salvage
// runs, is not overwritten: Salvage runs again and sees it. Here the
// damaged event is rewritten intact by a transaction that commits while
// Salvage waits to delete it; Salvage then keeps every event.
func TestStore_SalvageMeetsConcurrentWrite(t *testing.T) {
	t.Parallel()
	s := open(t, nil)
	defer s.Close()
	ctx := t.Context()
	for i := range uint64(6) {
		if err := s.PersistEvent(ctx, "a", i, fmt.Appendf(nil, "event %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	sql(t, fmt.Sprintf("UPDATE %s.events SET data = 'damaged' WHERE name = $1 AND idx = $2", s.Schema()), []byte("a"), biased(3))
	writer, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close(context.WithoutCancel(ctx))
	tx, err := writer.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	fixed := []byte("fixed 3")
	if _, err := tx.Exec(ctx, fmt.Sprintf("UPDATE %s.events SET data = $3, crc = $4 WHERE name = $1 AND idx = $2", s.Schema()),
		[]byte("a"), biased(3), fixed, int32(durability.Checksum(durability.RecordEvent, "a", 3, fixed))); err != nil {
		t.Fatal(err)
	}
	type result struct {
		got durability.Salvaged
		err error
	}
	done := make(chan result, 1)
	go func() {
		got, err := s.Salvage(ctx, "a")
		done <- result{got, err}
	}()
	waitLocked(t, "DELETE", s.Schema()) // Salvage, which saw event 3 damaged, waits to delete it
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if want := (durability.Salvaged{Events: 6}); r.err != nil || r.got != want {
		t.Fatalf("Salvage = %+v, %v; want %+v: the event rewritten meanwhile kept", r.got, r.err, want)
	}
	ev, err := events(t, s, "a", 0)
	if err != nil || strings.Join(ev, ",") != "0:event 0,1:event 1,2:event 2,3:fixed 3,4:event 4,5:event 5" {
		t.Errorf("after Salvage: %q, %v", ev, err)
	}
}

// waitLocked returns once a statement of kind verb ("SELECT", "DELETE")
// on schema's events table waits for a lock on the server.
func waitLocked(t *testing.T, verb, schema string) {
	t.Helper()
	watcher, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close(context.WithoutCancel(t.Context()))
	for waiting := false; !waiting; {
		err := watcher.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE $1 || ' %"' || $2 || '".events%')`, verb, schema).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Salvage refuses an invalid name, and fails after Close.
func TestStore_SalvageRefusals(t *testing.T) {
	t.Parallel()
	s := open(t, nil)
	if _, err := s.Salvage(t.Context(), ""); !errors.Is(err, durability.ErrInvalidName) {
		t.Errorf("Salvage of an empty name: %v, want ErrInvalidName", err)
	}
	if _, err := s.Salvage(t.Context(), strings.Repeat("x", pgstore.MaxNameLen+1)); !errors.Is(err, durability.ErrInvalidName) {
		t.Errorf("Salvage of a name over MaxNameLen: %v, want ErrInvalidName", err)
	}
	s.Close()
	if _, err := s.Salvage(t.Context(), "a"); !errors.Is(err, durability.ErrClosed) {
		t.Errorf("Salvage after Close: %v, want ErrClosed", err)
	}
}
