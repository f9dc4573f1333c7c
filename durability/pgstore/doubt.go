package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/internal/quote"
)

// Writes in doubt. A write reported with ErrOutcomeUnknown (its caller
// gave up after it was sent, or its connection was lost or closed) may
// still commit after the call returned: its transaction goes on for the
// writes that share it, or runs on in a server backend whose connection
// the store closed. Until that transaction has ended on the server, a
// read of the actor could show the write absent and a newer write could
// be overwritten by it. So the store keeps, per actor name, a count of
// such transactions, and every read and write of the actor waits until
// none is left (bounded by its own context: see Store.settled). A claim
// (and Salvage) whose outcome is unknown puts its key (its actor) in
// doubt alike: Epoch and Claim (the reads and writes of the actor) wait
// for it.
//
// A transaction's end is known when the store's own connection reports
// it (a commit, or the server's refusal). When the connection was closed
// or lost first, the store asks the server, in the background (see
// Store.settle), about the run (see run): by its transaction id, when
// the server reported it before the connection went, else by its
// backend, which has ended the transaction once it has exited. Neither
// can name another backend: a backend is named by its pid and its start
// time. An id names another transaction only after the server crashed
// (its recovery assigns again the ids that nothing durable named, such
// as that of a transaction the crash ended): so a run whose id the server
// says committed is checked against what the rows hold before its writes
// are reported stored (see Store.try); any other answer is only taken as
// the end of the run, which a crash also brings. While the server
// cannot be reached, the calls waiting for the doubt fail (see
// Store.settled): they would otherwise wait for as long as it is away.

// doubtKey names what is in doubt: an actor, or a claim's key.
type doubtKey struct {
	claim bool
	name  string
}

// quoteKeys quotes the names of keys for a log line, escaped, clipped and
// at most quote.MaxNames of each kind (a transaction may hold the writes
// of many actors, each name up to 32 KiB).
func quoteKeys(keys []doubtKey) string {
	var actors, claims []string
	for _, k := range keys {
		if k.claim {
			claims = append(claims, k.name)
		} else {
			actors = append(actors, k.name)
		}
	}
	var parts []string
	if len(actors) > 0 {
		parts = append(parts, "actors "+quote.Names(actors, "actor name"))
	}
	if len(claims) > 0 {
		parts = append(parts, "claims of "+quote.Names(claims, "claim key"))
	}
	return strings.Join(parts, "; ")
}

// what names k in errors.
func (k doubtKey) what() string {
	if k.claim {
		return "a claim of this key"
	}
	return "a write of this actor"
}

// doubt counts the transactions in doubt of one key. wake is closed (and
// replaced) when a check of the server (see Store.settle) ends, and when
// the count drops to zero; failed is the number of the last check that
// could not reach the server, and err its error, while no later check
// did.
type doubt struct {
	n      int
	wake   chan struct{}
	failed uint64
	err    error
}

// addDoubt counts one more transaction in doubt for key.
func (s *Store) addDoubt(key doubtKey) {
	s.doubtMu.Lock()
	defer s.doubtMu.Unlock()
	if s.doubts == nil {
		s.doubts = make(map[doubtKey]*doubt)
	}
	d := s.doubts[key]
	if d == nil {
		d = &doubt{wake: make(chan struct{})}
		s.doubts[key] = d
	}
	d.n++
	s.doubting.Add(1)
}

// eachDoubt calls fn, holding doubtMu, for the doubt of each of keys that
// has one.
func (s *Store) eachDoubt(keys []doubtKey, fn func(doubtKey, *doubt)) {
	s.doubtMu.Lock()
	defer s.doubtMu.Unlock()
	for _, key := range keys {
		if d := s.doubts[key]; d != nil {
			fn(key, d)
		}
	}
}

// endDoubt counts one transaction in doubt of each key as ended.
func (s *Store) endDoubt(keys ...doubtKey) {
	s.eachDoubt(keys, func(key doubtKey, d *doubt) {
		s.doubting.Add(-1)
		if d.n--; d.n == 0 {
			close(d.wake)
			delete(s.doubts, key)
		}
	})
}

// noteCheck records the outcome of check number seq of the transactions
// in doubt of keys (err when the server could not be reached) and wakes
// their waiters.
func (s *Store) noteCheck(keys []doubtKey, seq uint64, err error) {
	s.eachDoubt(keys, func(_ doubtKey, d *doubt) {
		if err != nil {
			d.failed, d.err = seq, err
		} else if seq > d.failed {
			d.failed, d.err = 0, nil
		}
		close(d.wake)
		d.wake = make(chan struct{})
	})
}

// settled waits until no transaction of key is in doubt. When ctx is done
// first it returns an error wrapping ErrOutcomeUnknown and ctx's error;
// when a check of the server started after the wait did cannot reach it,
// an error wrapping ErrOutcomeUnknown and the check's; ErrClosed when the
// store was closed meanwhile.
func (s *Store) settled(ctx context.Context, key doubtKey) error {
	if s.doubting.Load() == 0 {
		return nil
	}
	since := s.checks.Load()
	for {
		s.doubtMu.Lock()
		d := s.doubts[key]
		if d == nil {
			s.doubtMu.Unlock()
			return nil
		}
		if d.err != nil && d.failed > since {
			err := d.err
			s.doubtMu.Unlock()
			return fmt.Errorf("%w: %s is in doubt (its transaction, sent earlier, may still commit), and the server cannot be reached to learn whether it has ended: %w", ErrOutcomeUnknown, key.what(), err)
		}
		wake := d.wake
		s.doubtMu.Unlock()
		s.doubtWaiters.Add(1)
		select {
		case <-wake:
			s.doubtWaiters.Add(-1)
		case <-ctx.Done():
			s.doubtWaiters.Add(-1)
			return fmt.Errorf("%w: %s is still in doubt (its transaction, sent earlier, has not ended on the server, and may still commit), so the store cannot tell what it holds: %w", ErrOutcomeUnknown, key.what(), ctx.Err())
		case <-s.life.Done():
			s.doubtWaiters.Add(-1)
			return durability.ErrClosed
		}
	}
}

// Checks of the server for transactions in doubt: the first comes at
// once, the next ones ever more spaced, up to settleMaxWait apart; each
// gives up after checkTimeout (a server that fell silent).
const (
	settleMaxWait = time.Second
	checkTimeout  = 5 * time.Second
)

// settle waits, in the background, until none of the runs is running any
// longer (see Store.running), then ends the doubt of keys. Each check's
// outcome wakes the calls waiting for the doubt (see Store.settled). It
// gives up when the store is closed.
func (s *Store) settle(runs []run, keys []doubtKey) {
	s.settlers.Go(func() {
		wait, warned := 5*time.Millisecond, false
		for {
			seq := s.checks.Add(1)
			ctx, cancel := context.WithTimeout(s.life, checkTimeout)
			var err error
			runs, err = s.running(ctx, runs)
			cancel()
			if err == nil && len(runs) == 0 {
				s.endDoubt(keys...)
				return
			}
			if s.life.Err() != nil {
				return
			}
			s.noteCheck(keys, seq, err)
			if err != nil && !warned {
				warned = true
				s.log.Warn("pgstore: cannot learn whether a transaction in doubt has ended; the reads and writes of its actors fail until the server can tell", "keys", quoteKeys(keys), "err", err)
			}
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-s.life.Done():
				t.Stop()
				return
			}
			wait = min(2*wait, settleMaxWait)
		}
	})
}

// inDoubt puts key in doubt until r's transaction has ended.
func (s *Store) inDoubt(r run, key doubtKey) {
	s.addDoubt(key)
	s.settle([]run{r}, []doubtKey{key})
}

// running returns the runs whose transactions may still be running on the
// server (in place), or an error when the server cannot tell.
func (s *Store) running(ctx context.Context, runs []run) ([]run, error) {
	for i := 0; i < len(runs); {
		st, err := s.runStatus(ctx, runs[i])
		if err != nil {
			return runs, err
		}
		if st != inProgress {
			runs = append(runs[:i], runs[i+1:]...)
			continue
		}
		i++
	}
	return runs, nil
}

// The states of a run's transaction (see Store.runStatus).
const (
	inProgress = "in progress"
	committed  = "committed"
	aborted    = "aborted"
	ended      = "ended" // and whether it committed is not known
)

// invalidParameterValue is the SQLSTATE of txid_status for an id the
// server never assigned (one from a server it failed over from, that
// never reached it).
const invalidParameterValue = "22023"

// runStatus asks the server about r's transaction: inProgress, committed,
// aborted or ended. A simple query: one round trip, nothing prepared.
func (s *Store) runStatus(ctx context.Context, r run) (string, error) {
	var (
		st       string
		recovery bool
	)
	err := s.pool.QueryRow(ctx, s.q.runStatus, pgx.QueryExecModeSimpleProtocol, int64(r.pid), r.started, r.xid).Scan(&recovery, &st)
	return runState(r, recovery, st, err)
}

// errInRecovery is the error of a check of a run asked of a server in
// recovery (a standby, or a primary still replaying its WAL): it may not
// have replayed the run's transaction yet, and does not run the backends
// of the server it follows, so it cannot tell whether that transaction
// has ended; an id it has not seen is not one that never ran.
var errInRecovery = errors.New("the server is in recovery (a standby): it cannot tell whether the transaction has ended")

// runState decides the state of r's transaction from the server's answer
// to the runStatus query: st, and whether the server is in recovery, or
// the query's error.
func runState(r run, recovery bool, st string, err error) (string, error) {
	if recovery {
		return "", errInRecovery
	}
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == invalidParameterValue && r.xid != 0 {
		return aborted, nil
	}
	return st, err
}

// awaitEnd waits until r's transaction has ended on the server and
// returns its state (committed, aborted or ended). It fails when ctx is
// done first, or the server cannot tell: each check gives up after
// checkTimeout, as the background ones do (see Store.settle), so that a
// dead network (new connections reach nothing that answers) fails the
// write, in doubt, rather than hold its caller (who may have set no
// deadline) and its committer for as long as the network is away. A
// server that answers that the transaction is still running is waited
// for, as long as ctx allows.
func (s *Store) awaitEnd(ctx context.Context, r run) (string, error) {
	s.rerunWaiters.Add(1)
	defer s.rerunWaiters.Add(-1)
	wait := 5 * time.Millisecond
	for {
		cctx, cancel := context.WithTimeout(ctx, checkTimeout)
		st, err := s.runStatus(cctx, r)
		cancel()
		if err != nil && ctx.Err() == nil && cctx.Err() != nil {
			err = fmt.Errorf("the server did not answer within %v: %w", checkTimeout, err)
		}
		if err != nil {
			return "", fmt.Errorf("learn whether the first run's transaction has ended: %w", err)
		}
		if st != inProgress {
			return st, nil
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return "", fmt.Errorf("the first run's transaction has not ended on the server: %w", ctx.Err())
		}
		wait = min(2*wait, settleMaxWait)
	}
}
