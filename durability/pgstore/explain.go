package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// tooManyConnections is the SQLSTATE of a connection the server refuses
// because it has as many as it allows (max_connections, or the role's or
// the database's CONNECTION LIMIT).
const tooManyConnections = "53300"

// explained is an error of the server or of the store as a whole with
// what the caller needs to act on it: which store, what happened and
// what to do. errors.Is and errors.As see through it to the cause.
type explained struct {
	msg string // "pgstore host/db schema S: what happened; what to do"
	err error
}

func (e *explained) Error() string { return e.msg + ": " + e.err.Error() }
func (e *explained) Unwrap() error { return e.err }

// explain returns err with which store, what happened and what to do when
// it is a failure the caller must act on beyond this call: a server that
// takes no writes, a server that refuses new connections, a pool whose
// connections were all in use. Other errors, and nil, are returned as
// they are.
func (s *Store) explain(err error) error {
	var (
		pe   *pgconn.PgError
		full *poolFull
		what string
	)
	switch {
	case err == nil || errors.As(err, new(*explained)):
		return err
	case errors.As(err, &pe) && pe.Code == readOnlySQLTransaction:
		what = "the server takes no writes (a standby, or a primary demoted to one); " +
			"the store dropped its connections and the next call connects anew: " +
			"retry once the connection string leads to the primary (a proxy or a name moved to it, " +
			"or several hosts with target_session_attrs=read-write)"
	case errors.As(err, &pe) && pe.Code == tooManyConnections:
		what = "the server refused a new connection: it has as many as it allows " +
			"(max_connections, or the role's or database's CONNECTION LIMIT); " +
			"retry later, lower Options.MaxConns of the stores sharing the server, or raise its limit"
	case errors.As(err, &full):
		what = fmt.Sprintf("all %d connections of the store's pool were in use until the call's context ended; "+
			"give the call a longer deadline, or raise Options.MaxConns", full.max)
	default:
		return err
	}
	return &explained{msg: s.name + ": " + what, err: err}
}

// poolFull is the error of an acquisition of a connection that the
// caller's context ended while every connection of the pool was in use.
type poolFull struct {
	max int32
	err error
}

func (e *poolFull) Error() string { return e.err.Error() }
func (e *poolFull) Unwrap() error { return e.err }

// acquire takes a connection of the pool, as pgxpool's Acquire does; when
// ctx ends the wait while every connection is in use, the error says so
// (see explain).
func (s *Store) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil && ctx.Err() != nil {
		return nil, s.poolFullOr(err)
	}
	return conn, err
}

// poolFullOr returns err, the error of a wait that its context ended, as
// a poolFull when every connection of the pool is in use, or else as it
// is.
func (s *Store) poolFullOr(err error) error {
	if st := s.pool.Stat(); st.AcquiredConns() >= st.MaxConns() {
		return &poolFull{max: st.MaxConns(), err: err}
	}
	return err
}
