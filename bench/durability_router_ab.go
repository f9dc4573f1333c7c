package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/boltstore"
)

// Figure 4's bbolt rows with checksums on against off, measured as the
// store's checksum rows are (see durability_store_ab.go): each side has a
// bbolt store of its own, written and read only with its side's setting,
// and a runtime of its own (the chunks row's sides share one runtime of
// routers, see routerChunksAB), and the two sides' slices of work
// alternate in pairs.

// abSide is one side of an interleaved checksums run of figure 4's
// router and loop rows: a runtime of its own and a bbolt store that only
// this side writes (opened with newABSides' options, again with the
// defaults by reopen).
type abSide struct {
	on    bool
	path  string
	rt    *actors.Runtime
	store *boltstore.Store
}

// newABSides opens the two sides of an interleaved run in dir, their
// stores with opts, with checksums as checks says, and runs prepare for
// each (its index and itself) with its side's setting. On an error it
// closes what it opened.
func newABSides(dir string, checks [2]bool, opts *boltstore.Options, prepare func(i int, s *abSide) error) ([2]*abSide, error) {
	var sides [2]*abSide
	for i, on := range checks {
		s := &abSide{on: on, path: filepath.Join(dir, fmt.Sprintf("side%d.db", i))}
		sides[i] = s
		err := withChecks(on, func() error {
			var err error
			if s.rt, err = actors.NewRuntime(nil); err != nil {
				return err
			}
			if s.store, err = boltstore.Open(s.path, opts); err != nil {
				return err
			}
			return prepare(i, s)
		})
		if err != nil {
			return sides, errors.Join(fmt.Errorf("side %d: %w", i, err), closeABSides(sides))
		}
	}
	return sides, nil
}

// closeABSides stops the sides' runtimes and closes (and checkpoints)
// their stores, each with its side's setting, then verifies every store
// written with checksums: a record that a side wrote while the other
// side's setting held (work of a slice that went on after it) fails
// there.
func closeABSides(sides [2]*abSide) error {
	var errs []error
	for i, s := range sides {
		if s == nil {
			continue
		}
		err := withChecks(s.on, func() error {
			var errs []error
			if s.rt != nil {
				errs = append(errs, s.rt.Close(context.Background()))
			}
			if s.store != nil {
				errs = append(errs, s.store.Close())
			}
			return errors.Join(errs...)
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("side %d: closing: %w", i, err))
			continue
		}
		if !s.on || s.store == nil {
			continue
		}
		r, err := boltstore.Verify(s.path, nil)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("side %d: verifying %s: %w", i, s.path, err))
		case !r.Intact():
			errs = append(errs, fmt.Errorf("side %d: %s, written with checksums, does not verify: %v", i, s.path, errors.Join(verifyProblems(r)...)))
		}
	}
	return errors.Join(errs...)
}

// verifyProblems lists what a Verify report found damaged.
func verifyProblems(r *boltstore.Report) []error {
	errs := slices.Clone(r.Problems)
	if r.Unreadable != nil {
		errs = append(errs, r.Unreadable)
	}
	for _, a := range r.Actors {
		errs = append(errs, a.Damaged...)
	}
	return errs
}

// reopen closes the side's store and opens its file again, with default
// options (fsync on commit), as a process that restarts does.
func (s *abSide) reopen() error {
	err := s.store.Close()
	s.store = nil
	if err != nil {
		return err
	}
	s.store, err = boltstore.Open(s.path, nil)
	return err
}

// openABSides is newABSides in b's temporary folder, failing b on an
// error, and the function that closes them, failing b on an error.
func openABSides(b *testing.B, checks [2]bool, opts *boltstore.Options, prepare func(i int, s *abSide) error) ([2]*abSide, func()) {
	b.Helper()
	sides, err := newABSides(b.TempDir(), checks, opts, prepare)
	if err != nil {
		b.Fatal(err)
	}
	return sides, func() {
		if err := closeABSides(sides); err != nil {
			b.Error(err)
		}
	}
}

// routerChunksAB returns the setup of the interleaved run of the row
// "router chunks/s, bbolt, N streams": one runtime runs sessions
// streaming routers for both sides, all persisting to a [turnStore] that
// passes their writes to the bbolt store of the side whose turn it is; a
// slice has every router stream calls calls of routerChunks chunks at
// once. Items are chunks. The two sides share the routers, their
// goroutines and their memory, and differ in their store alone: with a
// runtime of routers a side, a run's two sides differed by up to 7 % of
// CPU time over the whole run (A/A, the pairs' ratios several times as
// tight as that), where the same routers taking turns differed by less.
func routerChunksAB(sessions, calls int) abSetup {
	return func(b *testing.B, checks [2]bool) abFixture {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		var routers []*routerSession
		turn := &turnStore{}
		sides, closeSides := openABSides(b, checks, nil, func(i int, s *abSide) error {
			turn.to(s.store)
			if routers == nil {
				var err error
				if routers, err = newRouterSessions(s.rt, sessions, turn); err != nil {
					return err
				}
			}
			return callAll(ctx, routers, 1) // warm up: actors started, store ready
		})
		slice := func(side int, _ bool) (int, error) {
			turn.to(sides[side].store)
			if err := callAll(ctx, routers, calls); err != nil {
				return 0, err
			}
			return sessions * calls * routerChunks, nil
		}
		return abFixture{slice: slice, done: func() { closeSides(); cancel() }}
	}
}

// turnStore is a durability.Store that passes every call to the store it
// was last pointed to (see routerChunksAB). Between turns nothing writes
// to it: a router's writes are done before it answers the call.
type turnStore struct {
	cur atomic.Pointer[boltstore.Store]
}

func (t *turnStore) to(s *boltstore.Store) { t.cur.Store(s) }

func (t *turnStore) PersistEvent(ctx context.Context, name string, index uint64, data []byte) error {
	return t.cur.Load().PersistEvent(ctx, name, index, data)
}

func (t *turnStore) PersistEvents(ctx context.Context, name string, first uint64, data [][]byte) error {
	return t.cur.Load().PersistEvents(ctx, name, first, data)
}

func (t *turnStore) GetEvents(ctx context.Context, name string, from, to uint64, fn func(uint64, []byte) error) error {
	return t.cur.Load().GetEvents(ctx, name, from, to, fn)
}

func (t *turnStore) DeleteEvents(ctx context.Context, name string, through uint64) error {
	return t.cur.Load().DeleteEvents(ctx, name, through)
}

func (t *turnStore) PersistSnapshot(ctx context.Context, name string, index uint64, data []byte) error {
	return t.cur.Load().PersistSnapshot(ctx, name, index, data)
}

func (t *turnStore) GetSnapshot(ctx context.Context, name string) (durability.Snapshot, bool, error) {
	return t.cur.Load().GetSnapshot(ctx, name)
}

func (t *turnStore) DeleteSnapshots(ctx context.Context, name string, through uint64) error {
	return t.cur.Load().DeleteSnapshots(ctx, name, through)
}

// Close does nothing: the sides' stores are closed with their sides.
func (t *turnStore) Close() error { return nil }

// routerRecoveryAB is the setup of the interleaved run of the row "router
// recovery of 10 000 pending calls (bbolt)": each side's store holds the
// pending calls of a durable router (recoveryRouter), written with the
// side's setting without fsync (a thousand fsynced commits a side would
// take seconds) and opened again with fsync, as after a restart, so that
// the router reads them from the file; a slice starts the router and
// waits until it has recovered and announced them all, and the router is
// stopped again after the slice, outside its measurement. Items are
// recoveries.
func routerRecoveryAB(b *testing.B, checks [2]bool) abFixture {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	var specs [2]actors.Spec
	var conns [2]*actors.Conn
	sides, closeSides := openABSides(b, checks, &boltstore.Options{NoSync: true}, func(i int, s *abSide) error {
		if _, err := recoveryRouter(ctx, s.rt, s.store); err != nil {
			return err
		}
		if err := s.reopen(); err != nil {
			return err
		}
		var err error
		specs[i], err = recoverySpec(s.store)
		return err
	})
	slice := func(side int, _ bool) (int, error) {
		conn, err := recoverRouter(ctx, sides[side].rt, specs[side])
		if err != nil {
			return 0, err
		}
		conns[side] = conn
		return 1, nil
	}
	after := func(side int) error {
		conn := conns[side]
		conns[side] = nil
		return conn.Close(ctx)
	}
	return abFixture{slice: slice, after: after, done: func() { closeSides(); cancel() }}
}

// loopBigArgAB returns the setup of the interleaved run of the row "loop
// session, 1 MiB streamed argument, bbolt": a slice plays conversations
// conversations of benchLoopBigArg one after the other, each on a new
// loop whose Session persists in the side's store. Items are
// conversations.
func loopBigArgAB(conversations int) abSetup {
	return func(b *testing.B, checks [2]bool) abFixture {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		var convs [2]*bigArgConversation
		_, closeSides := openABSides(b, checks, nil, func(i int, s *abSide) error {
			convs[i] = newBigArgConversation(s.rt, s.store)
			return convs[i].run(ctx) // warm up
		})
		slice := func(side int, _ bool) (int, error) {
			for range conversations {
				if err := convs[side].run(ctx); err != nil {
					return 0, err
				}
			}
			return conversations, nil
		}
		return abFixture{slice: slice, done: func() { closeSides(); cancel() }}
	}
}

// routerChecksumRows are figure 4's bbolt rows that the checksums touch,
// measured with checksums on against off in one interleaved run per
// round, each with its A/A row (checksums on both sides: the spread of
// the method itself).
func routerChecksumRows(c *config) []Row {
	streams, calls := 64, 2
	if c.smoke {
		streams, calls = 2, 1
	}
	// A pair of slices (each from a collected heap) takes some 0.05 to
	// 0.1 s on 2 busy cores: a round of 10 times -benchtime (6 for the
	// recovery, whose pairs spread less) holds some 30 pairs, the first 2
	// not counted. The chunks row counts CPU time, over 12 times
	// -benchtime: a slice's wall time waits on fsync and on the last few
	// of its 64 streams (over the same pairs of an A/A run, 6 rounds on a
	// busy machine, the wall ratios ranged from 0.90 to 0.99, the CPU
	// ratios from 0.95 to 1.01; in wall time over 10, the A/A rounds of
	// the bench ranged from 0.89 to 1.13).
	r := pairRun{until: c.abTime(10), warmup: 2, gc: true}
	rec := pairRun{until: c.abTime(6), warmup: 2, gc: true}
	longer := pairRun{until: c.abTime(12), warmup: 2, gc: true}
	chunks := routerChunksAB(streams, calls)
	chunksOn, chunksOff, chunksAA, chunksAA2 := checksumABAndAA(true, longer, chunks)
	recOn, recOff, recAA, recAA2 := checksumABAndAA(false, rec, routerRecoveryAB)
	loopOn, loopOff, loopAA, loopAA2 := checksumABAndAA(false, r, loopBigArgAB(1))
	const aa = "the row above with checksums on both sides: the spread of the method itself (1.00× is exact)"
	chunksName := fmt.Sprintf("router chunks/s, bbolt, %d streams", streams)
	return c.rows([]pair{
		{figure: "4", name: chunksName + ", checksums on vs off", ours: chunksOn, base: chunksOff,
			kind: throughput, unit: "chunks per CPU", goal: ratioAtLeast(0.97),
			note: fmt.Sprintf("chunks per second of the process's CPU time: one run per round, the sides interleaved: one runtime of %d streaming routers for both sides, persisting in a side's turn to that side's bbolt file (each written only with its setting; the sides differ in their store alone), stream %d calls of %d chunks per router in turn, in pairs of turns whose order is drawn at random, the process's CPU time of each turn (its wall time waits on fsync and on the last streams of a turn: over the same pairs of two sides doing the same work, the rounds' wall ratios spread several times as wide as their CPU ratios; what checksums add is CPU work, a larger share of the CPU time than of the wall time)", streams, calls, routerChunks) + byPairsNote},
		{figure: "4", name: chunksName + ", checksums on vs on (A/A)", ours: chunksAA, base: chunksAA2,
			kind: throughput, unit: "chunks per CPU", goal: info, note: aa},
		{figure: "4", name: "router recovery of 10 000 pending calls (bbolt), checksums on vs off", ours: recOn, base: recOff,
			kind: duration, unit: "recovery", goal: ratioAtMost(1.03),
			note: "one run per round, the sides interleaved: two durable routers, each on a runtime and a bbolt file of its own holding its 10 000 pending calls written with its side's setting (without fsync, then opened again with it, as after a restart: the recovery reads the calls from the file, checked, where the store of the row \"router recovery of 10 000 pending calls (bbolt)\", filled in the same process, holds them in its log in memory until a checkpoint moves them), started in turn until each has recovered and announced them all on their 100 streams, written on again (stopped again outside the measurement), in pairs whose order is drawn at random, wall time" + byPairsNote},
		{figure: "4", name: "router recovery of 10 000 pending calls (bbolt), checksums on vs on (A/A)", ours: recAA, base: recAA2,
			kind: duration, unit: "recovery", goal: info, note: aa},
		{figure: "4", name: "loop session, 1 MiB streamed argument, bbolt, checksums on vs off", ours: loopOn, base: loopOff,
			kind: duration, unit: "conversation", goal: ratioAtMost(1.03),
			note: "one run per round, the sides interleaved: each side's sessions on a runtime and a bbolt file of its own written only with its setting, one conversation a turn, in pairs of turns whose order is drawn at random, wall time" + byPairsNote},
		{figure: "4", name: "loop session, 1 MiB streamed argument, bbolt, checksums on vs on (A/A)", ours: loopAA, base: loopAA2,
			kind: duration, unit: "conversation", goal: info, note: aa},
	})
}

// checksumABAndAA returns the sides of a checksums row, in the process's
// CPU time if perCPU (otherwise wall time), run as r says on the fixtures
// setup makes, and those of its A/A row.
func checksumABAndAA(perCPU bool, r pairRun, setup abSetup) (on, off, aa, aa2 side) {
	on, off = checksumSides(onOffNames, checksumsAB, perCPU, r, setup)
	aa, aa2 = checksumSides(onOnNames, checksumsAA, perCPU, r, setup)
	return on, off, aa, aa2
}
