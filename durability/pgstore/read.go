package pgstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/polyweave/polyweave-go/durability"
)

// Reads fetch events in pages so that a long history is neither held in
// memory at once nor read while a callback runs: the callback may use the
// store, and holds no connection.
const (
	pageRows  = 512
	pageBytes = 8 << 20
)

type row struct {
	idx  uint64
	data []byte
}

// GetEvents implements [durability.Store]. Every row is checked against
// its checksum before fn sees it; a damaged one ends the read with
// durability.ErrDamaged.
func (s *Store) GetEvents(ctx context.Context, name string, from, to uint64, fn func(index uint64, data []byte) error) error {
	const op = durability.OpGetEvents
	if !validName(name) {
		return &durability.StoreError{Op: op, Name: name, Err: durability.InvalidName(name, MaxNameLen)}
	}
	if err := ctx.Err(); err != nil {
		return &durability.StoreError{Op: op, Name: name, Err: err}
	}
	if err := s.settled(ctx, doubtKey{name: name}); err != nil {
		return &durability.StoreError{Op: op, Name: name, Err: err}
	}
	ctx, done, err := s.beginRead(ctx)
	if err != nil {
		return &durability.StoreError{Op: op, Name: name, Err: err}
	}
	defer done()
	hi := int64(maxBiased)
	if to != 0 {
		if to <= from {
			return nil
		}
		hi = bias(to - 1)
	}
	lo := bias(from)
	var page []row
	for {
		var more bool
		err := s.read(ctx, func() (err error) {
			page, more, err = s.readPage(ctx, name, lo, hi, page[:0])
			return err
		})
		if err != nil {
			return storeErr(op, name, s.explain(err))
		}
		for _, r := range page {
			if err := fn(r.idx, r.data); err != nil {
				return err
			}
		}
		if !more {
			return nil
		}
		lo = bias(page[len(page)-1].idx) + 1
	}
}

// read runs q, a read, and notes its failure as a write's is noted (see
// noteFailure). When q failed because its connection was lost, the pool
// has been reset and q runs once more, on a fresh connection, unless ctx
// is done: a read has no side effects, and q hands nothing to the caller
// before it succeeds (GetEvents delivers a page once it is read whole), so
// the second run cannot repeat or mix in the first's rows. After a server
// restart, then, no read fails on the dead connections of the pool, not
// even the first; if the server is still down, the second run's error is
// returned. A read refused because a table changed under the store (see
// staleStatement) runs once more too, on a fresh connection, which
// prepares its statement for the table as it is.
func (s *Store) read(ctx context.Context, q func() error) error {
	err := q()
	s.noteFailure(err)
	if err == nil || ctx.Err() != nil || !connectionLost(err) && !staleStatement(err) {
		return err
	}
	err = q()
	s.noteFailure(err)
	return err
}

// readPage reads events of name in [lo, hi] (biased), up to pageRows rows
// or about pageBytes bytes, and reports whether more may follow.
func (s *Store) readPage(ctx context.Context, name string, lo, hi int64, page []row) ([]row, bool, error) {
	conn, err := s.acquire(ctx)
	if err != nil {
		return page, false, err
	}
	defer conn.Release()
	rows, err := conn.Query(ctx, s.q.getEvents, []byte(name), lo, hi, pageRows)
	if err != nil {
		return page, false, err
	}
	defer rows.Close()
	size, n := 0, 0
	var sum *durability.Summer // after the first rows: see summerAfter
	for rows.Next() {
		n++
		var (
			idx  int64
			data []byte
			crc  int32
		)
		if err := rows.Scan(&idx, &data, &crc); err != nil {
			return page, false, err
		}
		index := unbias(idx)
		if n > summerAfter && sum == nil {
			sum = durability.NewSummer(durability.RecordEvent, name)
		}
		var want int32
		if sum != nil {
			want = int32(sum.Sum(index, data))
		} else {
			want = checksum(durability.RecordEvent, name, index, data)
		}
		if crc != want {
			return page, false, s.damaged(durability.RecordEvent, index)
		}
		if data == nil {
			data = []byte{}
		}
		page = append(page, row{index, data})
		if size += len(data); size >= pageBytes {
			rows.Close()
			return page, idx != hi, rows.Err()
		}
	}
	if err := rows.Err(); err != nil {
		return page, false, err
	}
	return page, n == pageRows && unbias(hi) != page[len(page)-1].idx, nil
}

// damaged is the cause reported for a row that fails its checksum.
func (s *Store) damaged(kind durability.RecordKind, index uint64) error {
	return durability.Damaged(s.name, kind, index, "checksum mismatch")
}

// GetSnapshot implements [durability.Store]. The snapshot is checked against
// its checksum; a damaged one is reported with durability.ErrDamaged, not
// skipped.
func (s *Store) GetSnapshot(ctx context.Context, name string) (durability.Snapshot, bool, error) {
	const op = durability.OpGetSnapshot
	if !validName(name) {
		return durability.Snapshot{}, false, &durability.StoreError{Op: op, Name: name, Err: durability.InvalidName(name, MaxNameLen)}
	}
	if err := ctx.Err(); err != nil {
		return durability.Snapshot{}, false, &durability.StoreError{Op: op, Name: name, Err: err}
	}
	if err := s.settled(ctx, doubtKey{name: name}); err != nil {
		return durability.Snapshot{}, false, &durability.StoreError{Op: op, Name: name, Err: err}
	}
	ctx, done, err := s.beginRead(ctx)
	if err != nil {
		return durability.Snapshot{}, false, &durability.StoreError{Op: op, Name: name, Err: err}
	}
	defer done()
	var (
		idx  int64
		data []byte
		crc  int32
	)
	err = s.read(ctx, func() error {
		conn, err := s.acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		return conn.QueryRow(ctx, s.q.getSnapshot, []byte(name)).Scan(&idx, &data, &crc)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return durability.Snapshot{}, false, nil
	}
	if err != nil {
		return durability.Snapshot{}, false, &durability.StoreError{Op: op, Name: name, Err: s.explain(err)}
	}
	index := unbias(idx)
	if crc != checksum(durability.RecordSnapshot, name, index, data) {
		return durability.Snapshot{}, false, &durability.StoreError{Op: op, Name: name, Err: s.damaged(durability.RecordSnapshot, index)}
	}
	if data == nil {
		data = []byte{}
	}
	return durability.Snapshot{Index: index, Data: data}, true, nil
}
