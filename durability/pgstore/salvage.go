package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/internal/quote"
)

// OpSalvage is the operation named in the errors of [Store.Salvage] and
// [Claim.Salvage].
const OpSalvage = "salvage"

// salvageAttempts bounds how many times Salvage runs its transaction when
// it meets a concurrent write of the actor (or loses its connection
// before it commits).
const salvageAttempts = 3

var (
	_ durability.Salvager = (*Store)(nil)
	_ durability.Salvager = (*Claim)(nil)
)

// Salvage implements [durability.Salvager]: it lets a damaged actor be
// recovered again, by dropping state. It keeps name's newest intact
// snapshot and the intact events that follow it without a gap (from index
// 0 if no snapshot is intact), and deletes everything else of name:
// damaged rows, the events after the first damaged or missing one, older
// snapshots and the events below the kept snapshot. Recovery then resumes
// from the last intact snapshot. What is dropped is lost, so the store
// never does this on its own: the caller asks for it, after reading the
// damage (a read that fails with durability.ErrDamaged).
//
// It runs in one transaction under ctx (see Salvage in the package doc):
// every other member sees name before or after it, never in between. An
// error wrapping [ErrOutcomeUnknown] means the transaction's commit was
// sent and its answer lost; until the transaction has ended on the
// server, the actor is in doubt, as after a write whose outcome is
// unknown (the store's reads and writes of it wait), and Salvage again is
// safe (it then drops only what is left to drop). Any other error means
// nothing was dropped.
//
// Salvage through the store is not fenced; through a [Claim], it is
// ([Claim.Salvage]).
func (s *Store) Salvage(ctx context.Context, name string) (durability.Salvaged, error) {
	return s.salvage(ctx, nil, name)
}

// Salvage is [Store.Salvage], fenced: it drops nothing, and fails with
// [ErrFenced], once a newer claim of the key was taken.
func (c *Claim) Salvage(ctx context.Context, name string) (durability.Salvaged, error) {
	if c.closed.Load() {
		return durability.Salvaged{}, &durability.StoreError{Op: OpSalvage, Name: name, Err: durability.ErrClosed}
	}
	return c.s.salvage(ctx, &c.f, name)
}

// salvage runs Salvage's transaction, checking fence f first when it is
// not nil, and runs it again (up to salvageAttempts runs) when it failed
// on a concurrent write of name, on a statement prepared before a table
// changed, or on a lost connection before its commit was sent: a run that
// failed so dropped nothing.
func (s *Store) salvage(ctx context.Context, f *fence, name string) (durability.Salvaged, error) {
	if !validName(name) {
		return durability.Salvaged{}, &durability.StoreError{Op: OpSalvage, Name: name, Err: durability.InvalidName(name, MaxNameLen)}
	}
	if err := ctx.Err(); err != nil {
		return durability.Salvaged{}, &durability.StoreError{Op: OpSalvage, Name: name, Err: err}
	}
	if err := s.settled(ctx, doubtKey{name: name}); err != nil {
		return durability.Salvaged{}, &durability.StoreError{Op: OpSalvage, Name: name, Err: err}
	}
	ctx, done, err := s.beginRead(ctx)
	if err != nil {
		return durability.Salvaged{}, &durability.StoreError{Op: OpSalvage, Name: name, Err: err}
	}
	defer done()
	var out durability.Salvaged
	for attempt := 1; ; attempt++ {
		out, err = s.salvageTx(ctx, f, name)
		s.noteFailure(err)
		if err == nil || attempt == salvageAttempts || ctx.Err() != nil || !salvageAgain(err) {
			break
		}
		s.log.Info("pgstore: running Salvage again", "actor", quote.Name(name, "actor name"), "attempt", attempt+1, "err", err)
	}
	if err != nil {
		return durability.Salvaged{}, &durability.StoreError{Op: OpSalvage, Name: name, Err: s.explain(fencedOr(err))}
	}
	if out.Dropped > 0 {
		s.log.Warn("pgstore: actor salvaged: records dropped", "schema", s.schema, "actor", quote.Name(name, "actor name"), "kept", out)
	}
	return out, nil
}

// salvageAgain reports whether a Salvage transaction that failed with err
// dropped nothing and may succeed if run again: it met a concurrent write
// of the actor (40001 serialization_failure, 40P01 deadlock_detected), a
// statement prepared before a table changed under the store (see
// staleStatement: the pool was emptied, and a fresh connection prepares
// it anew), or its connection was lost before its commit was sent.
func salvageAgain(err error) bool {
	if errors.Is(err, ErrOutcomeUnknown) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01") {
		return true
	}
	return staleStatement(err) || connectionLost(err)
}

// salvageTx is one run of Salvage's transaction. It runs at REPEATABLE
// READ: it reads name's rows and deletes those it does not keep as of one
// snapshot of the database, and a concurrent transaction that changed or
// deleted one of the rows it deletes fails it (40001, see salvageAgain)
// instead of being overwritten. Rows written by transactions it does not
// see are left as they are: those writes come after it.
func (s *Store) salvageTx(ctx context.Context, f *fence, name string) (out durability.Salvaged, err error) {
	conn, err := s.acquire(ctx)
	if err != nil {
		return out, err
	}
	defer conn.Release() // after the Rollback below
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		return out, err
	}
	defer tx.Rollback(ctx) // bounded by ctx: once it is done, the connection is closed, which rolls back
	// The transaction's id, to learn when it has ended should the
	// answer to its commit be lost (see doubt.go).
	r := runOn(tx.Conn().PgConn())
	if err := tx.QueryRow(ctx, s.q.txid).Scan(&r.xid); err != nil {
		return out, err
	}
	if f != nil {
		if _, err := tx.Exec(ctx, s.q.checkFences, [][]byte{f.key}, []int64{f.epoch}); err != nil {
			return out, err
		}
	}
	key := []byte(name)
	var (
		idx  int64
		data []byte
		crc  int32
	)
	// The newest intact snapshot.
	rows, err := tx.Query(ctx, s.q.salvageSnapshots, key)
	if err != nil {
		return out, err
	}
	for rows.Next() {
		if err := rows.Scan(&idx, &data, &crc); err != nil {
			rows.Close()
			return out, err
		}
		if i := unbias(idx); crc == checksum(durability.RecordSnapshot, name, i, data) {
			out.Snapshot, out.SnapshotIndex = true, i
			break
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return out, err
	}
	out.From = out.SnapshotIndex
	// The intact events from the snapshot's index on, without a gap.
	if rows, err = tx.Query(ctx, s.q.salvageEvents, key, bias(out.From)); err != nil {
		return out, err
	}
	next := out.From
	for rows.Next() {
		if err := rows.Scan(&idx, &data, &crc); err != nil {
			rows.Close()
			return out, err
		}
		i := unbias(idx)
		if i != next || crc != checksum(durability.RecordEvent, name, i, data) {
			break // the first damaged or missing event ends the run
		}
		out.Events++
		next++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return out, err
	}
	// Everything else goes. NULL bounds keep nothing.
	var snap, first, last *int64
	if out.Snapshot {
		b := bias(out.SnapshotIndex)
		snap = &b
	}
	if out.Events > 0 {
		lo, hi := bias(out.From), bias(out.From+uint64(out.Events-1))
		first, last = &lo, &hi
	}
	tag, err := tx.Exec(ctx, s.q.dropSnapshots, key, snap)
	if err != nil {
		return out, err
	}
	out.Dropped = int(tag.RowsAffected())
	if tag, err = tx.Exec(ctx, s.q.dropEvents, key, first, last); err != nil {
		return out, err
	}
	out.Dropped += int(tag.RowsAffected())
	if err := tx.Commit(ctx); err != nil {
		if unknownOutcome(err) {
			s.inDoubt(r, doubtKey{name: name})
			return out, fmt.Errorf("%w: the commit of Salvage was sent and its answer lost (Salvage again is safe): %w", ErrOutcomeUnknown, err)
		}
		return out, err
	}
	return out, nil
}
