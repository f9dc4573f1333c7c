package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/polyweave/polyweave-go/durability"
)

// Writes in doubt. A write reported with ErrOutcomeUnknown (its caller
// gave up after it was sent, or its connection was lost or closed) may
// still commit after the call returned: its transaction goes on for the
// writes that share it, or runs on in a server backend whose connection
// the store closed. Until that transaction has ended on the server, a
// read of the actor could show the write absent and a newer write could
// be overwritten by it. So the store keeps, per actor name, a count of
// such transactions, and every read and write of the actor waits until
// none is left (bounded by its own context: see Store.settled).
//
// A transaction's end is known when the store's own connection reports
// it (a commit, or the server's refusal). When the connection was closed
// or lost first, the store waits, in the background, for the server
// backend that ran it to exit (see Store.settleBackends).

// doubt counts the transactions in doubt of one actor; ended is closed
// when the count drops to zero.
type doubt struct {
	n     int
	ended chan struct{}
}

// addDoubt counts one more transaction in doubt for name.
func (s *Store) addDoubt(name string) {
	s.doubtMu.Lock()
	defer s.doubtMu.Unlock()
	if s.doubts == nil {
		s.doubts = make(map[string]*doubt)
	}
	d := s.doubts[name]
	if d == nil {
		d = &doubt{ended: make(chan struct{})}
		s.doubts[name] = d
	}
	d.n++
	s.doubting.Add(1)
}

// endDoubt counts one transaction in doubt of each name as ended.
func (s *Store) endDoubt(names ...string) {
	s.doubtMu.Lock()
	defer s.doubtMu.Unlock()
	for _, name := range names {
		d := s.doubts[name]
		if d == nil {
			continue
		}
		s.doubting.Add(-1)
		if d.n--; d.n == 0 {
			close(d.ended)
			delete(s.doubts, name)
		}
	}
}

// settled waits until no transaction of name is in doubt. When ctx is
// done first it returns an error wrapping ErrOutcomeUnknown and ctx's
// error; ErrClosed when the store was closed meanwhile.
func (s *Store) settled(ctx context.Context, name string) error {
	for s.doubting.Load() > 0 {
		s.doubtMu.Lock()
		d := s.doubts[name]
		s.doubtMu.Unlock()
		if d == nil {
			return nil
		}
		s.doubtWaiters.Add(1)
		select {
		case <-d.ended:
			s.doubtWaiters.Add(-1)
		case <-ctx.Done():
			s.doubtWaiters.Add(-1)
			return fmt.Errorf("%w: a write of this actor is still in doubt (its transaction, sent earlier, has not ended on the server, and may still commit), so the store cannot tell what it holds: %w", ErrOutcomeUnknown, ctx.Err())
		case <-s.life.Done():
			s.doubtWaiters.Add(-1)
			return durability.ErrClosed
		}
	}
	return nil
}

// settleBackends waits, in the background, until none of the server
// backends pids runs any longer (their transactions have ended: a
// backend whose connection was closed runs its transaction to its end,
// then exits), then ends the doubt of names. It gives up when the store
// is closed. A pid taken meanwhile by a new backend only makes it wait
// longer.
func (s *Store) settleBackends(pids []int64, names []string) {
	s.settlers.Go(func() {
		wait, warned := 5*time.Millisecond, false
		for {
			var alive bool
			// A simple query: one round trip, nothing prepared.
			err := s.pool.QueryRow(s.life, s.q.backendsAlive, pgx.QueryExecModeSimpleProtocol, pids).Scan(&alive)
			if err == nil && !alive {
				s.endDoubt(names...)
				return
			}
			if err != nil && s.life.Err() == nil && !warned {
				warned = true
				s.log.Warn("pgstore: cannot learn whether a transaction in doubt has ended; the reads and writes of its actors wait for it", "actors", names, "err", err)
			}
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-s.life.Done():
				t.Stop()
				return
			}
			wait = min(2*wait, time.Second)
		}
	})
}
