package pgstore

import (
	"context"
	"runtime"
)

// OpenConns holds n connections of s's pool at once and returns them to
// it, so that the pool holds at least n.
func OpenConns(ctx context.Context, s *Store, n int) error {
	for range n {
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer c.Release()
	}
	return nil
}

// PoolConns returns how many connections s's pool holds, idle or in use.
func PoolConns(s *Store) int32 { return s.pool.Stat().TotalConns() }

// PoolNewConns returns how many connections s's pool has dialed since Open.
func PoolNewConns(s *Store) int64 { return s.pool.Stat().NewConnsCount() }

// WaitQueued waits until n writes wait in s's queue, not yet taken by a
// committer.
func WaitQueued(s *Store, n int) {
	for len(s.writes) < n {
		runtime.Gosched()
	}
}

// WaitDoubtWaiters waits until n calls of s wait for a write in doubt
// (see Store.settled).
func WaitDoubtWaiters(s *Store, n int64) {
	for s.doubtWaiters.Load() < n {
		runtime.Gosched()
	}
}

// DoubtWaiters returns how many calls of s wait for a write in doubt.
func DoubtWaiters(s *Store) int64 { return s.doubtWaiters.Load() }

// RerunWaiters returns how many runs again of writes whose connection was
// lost wait for the first run's transaction to end.
func RerunWaiters(s *Store) int64 { return s.rerunWaiters.Load() }

// HoldConns takes n connections of s's pool and keeps them until release
// is called.
func HoldConns(ctx context.Context, s *Store, n int) (release func(), _ error) {
	var held []interface{ Release() }
	release = func() {
		for _, c := range held {
			c.Release()
		}
	}
	for range n {
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			release()
			return nil, err
		}
		held = append(held, c)
	}
	return release, nil
}
