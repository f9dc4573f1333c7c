package pgstore

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"strconv"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// run names one run of a transaction on the server, so that the store
// can learn when it has ended when its connection is gone (see doubt.go):
// the server backend that ran it, by its pid and its start (microseconds
// since 1970; a new backend given the same pid starts later), and the
// transaction's id (txid_current), 0 when the server did not report it
// before the connection went.
type run struct {
	pid     uint32
	started int64
	xid     int64
}

// backendKey keys a connection's backend start in its CustomData.
const backendKey = "pgstore.backend_start"

// noteBackend learns the start of the server backend of a new connection
// (pgxpool's AfterConnect), which names it with its pid. A simple query,
// so that nothing is prepared on the connection yet.
func noteBackend(ctx context.Context, conn *pgx.Conn) error {
	var started int64
	err := conn.QueryRow(ctx, `SELECT coalesce((extract(epoch FROM backend_start) * 1000000)::bigint, 0)
		FROM pg_catalog.pg_stat_activity WHERE pid = pg_catalog.pg_backend_pid()`, pgx.QueryExecModeSimpleProtocol).Scan(&started)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("pgstore: learn the start of the connection's server backend: %w", err)
	}
	conn.PgConn().CustomData()[backendKey] = started
	return nil
}

// runOn returns the run of a transaction on c, its id not known yet.
func runOn(c *pgconn.PgConn) run {
	started, _ := c.CustomData()[backendKey].(int64)
	return run{pid: c.PID(), started: started}
}

// dialer wraps the pool's dial function and keeps the connections it
// made (those of the pool, and those that carry cancel requests), so
// that Close can close them at once (see Store.Close) instead of waiting
// for a silent server to answer their clean close.
type dialer struct {
	dial   pgconn.DialFunc
	ctx    context.Context // cancelled by closeAll: dials in progress fail
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	conns  map[*dialedConn]struct{}
}

func newDialer(dial pgconn.DialFunc) *dialer {
	d := &dialer{dial: dial, conns: make(map[*dialedConn]struct{})}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	return d
}

// errConnsClosed is the error of a dial after closeAll.
var errConnsClosed = errors.New("pgstore: the store closed its connections")

// DialContext dials as the wrapped function does, unless closeAll was
// called, and keeps the connection.
func (d *dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(d.ctx, cancel)
	defer stop()
	c, err := d.dial(ctx, network, addr)
	if err != nil {
		if d.ctx.Err() != nil {
			return nil, fmt.Errorf("%w: %w", errConnsClosed, err)
		}
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		c.Close()
		return nil, errConnsClosed
	}
	dc := &dialedConn{Conn: c, d: d}
	d.conns[dc] = struct{}{}
	return dc, nil
}

// closeAll closes every connection kept and fails later dials.
func (d *dialer) closeAll() {
	d.cancel()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	for c := range d.conns {
		c.Conn.Close()
	}
	clear(d.conns)
}

// dialedConn is a connection kept by its dialer until it is closed.
type dialedConn struct {
	net.Conn
	d *dialer
}

func (c *dialedConn) Close() error {
	c.d.mu.Lock()
	delete(c.d.conns, c)
	c.d.mu.Unlock()
	return c.Conn.Close()
}

// runPipelined runs the statements of b on conn in one implicit
// transaction, in one round trip once they are prepared on conn, as
// pgx's SendBatch does; but the first statement, which must return the
// transaction's id (txid), is followed by a Flush, so that the server
// sends its answer before it runs the others: the id is known before the
// transaction commits, even when the connection is lost while it runs
// (see doubt.go). It returns the id (0 when it did not come) and the
// first error. When last is not nil, the last statement returns one
// bigint, stored in *last.
func runPipelined(ctx context.Context, conn *pgx.Conn, b *pgx.Batch, last *int64) (xid int64, err error) {
	sds := make([]*pgconn.StatementDescription, len(b.QueuedQueries))
	for i, q := range b.QueuedQueries {
		h := fnv.New64a()
		h.Write([]byte(q.SQL))
		// Prepared once per connection, under a name that fits the server's
		// 63 bytes.
		if sds[i], err = conn.Prepare(ctx, fmt.Sprintf("pgstore_%x", h.Sum64()), q.SQL); err != nil {
			return 0, unsent{err} // nothing of the transaction was sent
		}
	}
	var eqb pgx.ExtendedQueryBuilder
	pipe := conn.PgConn().StartPipeline(ctx)
	for i, q := range b.QueuedQueries {
		if err := eqb.Build(conn.TypeMap(), sds[i], q.Arguments); err != nil {
			pipe.Close()
			return 0, unsent{err}
		}
		pipe.SendQueryStatement(sds[i], eqb.ParamValues, eqb.ParamFormats, eqb.ResultFormats)
		if i == 0 {
			pipe.SendFlushRequest()
		}
	}
	if err := pipe.Sync(); err != nil {
		pipe.Close()
		return 0, err
	}
	for i := 0; ; i++ {
		res, rerr := pipe.GetResults()
		if rerr != nil {
			err = cmp.Or(err, rerr)
			if !errors.As(rerr, new(*pgconn.PgError)) {
				break // the connection failed: Close says no more
			}
			continue
		}
		switch res := res.(type) {
		case *pgconn.ResultReader:
			switch {
			case i == 0:
				for res.NextRow() {
					xid, _ = decodeInt8(res.FieldDescriptions(), res.Values())
				}
			case i == len(sds)-1 && last != nil:
				n := 0
				for res.NextRow() {
					v, derr := decodeInt8(res.FieldDescriptions(), res.Values())
					*last, err, n = v, cmp.Or(err, derr), n+1
				}
				if n != 1 {
					err = cmp.Or(err, fmt.Errorf("%d rows, want one", n))
				}
			}
			if _, cerr := res.Close(); cerr != nil {
				if i == 0 {
					xid = 0
				}
				err = cmp.Or(err, cerr)
			}
		case *pgconn.PipelineSync:
			return xid, cmp.Or(err, pipe.Close())
		case nil:
			return xid, cmp.Or(err, pipe.Close())
		}
	}
	return xid, cmp.Or(err, pipe.Close())
}

// decodeInt8 decodes the one integer of a row, in text or binary, by
// its column's type: a bigint as the store creates its columns, or an
// integer or smallint, which an operator may have made of one. A value of
// another type is refused with an error that names it, rather than taken
// for a bigint by its length.
func decodeInt8(fields []pgconn.FieldDescription, values [][]byte) (int64, error) {
	if len(values) != 1 || len(fields) != 1 {
		return 0, errors.New("want one column")
	}
	f, v := fields[0], values[0]
	size := 0
	switch f.DataTypeOID {
	case pgtype.Int8OID:
		size = 8
	case pgtype.Int4OID:
		size = 4
	case pgtype.Int2OID:
		size = 2
	default:
		return 0, fmt.Errorf("column %q is of type OID %d, want bigint (OID %d): the table is not as this version of the store creates it", f.Name, f.DataTypeOID, pgtype.Int8OID)
	}
	if v == nil {
		return 0, fmt.Errorf("column %q is NULL, want a number", f.Name)
	}
	if f.Format != pgx.BinaryFormatCode {
		return strconv.ParseInt(string(v), 10, 64)
	}
	if len(v) != size {
		return 0, fmt.Errorf("column %q: %d bytes for type OID %d, want %d", f.Name, len(v), f.DataTypeOID, size)
	}
	switch size {
	case 8:
		return int64(binary.BigEndian.Uint64(v)), nil
	case 4:
		return int64(int32(binary.BigEndian.Uint32(v))), nil
	}
	return int64(int16(binary.BigEndian.Uint16(v))), nil
}
