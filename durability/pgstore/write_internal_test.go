package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// A batch whose failure is the server's (or the connection's) fails as a
// whole; one whose failure may be one write's is retried write by write.
func TestServerFailure(t *testing.T) {
	for code, want := range map[string]bool{
		"25006": true,  // read_only_sql_transaction
		"08006": true,  // connection_failure
		"08P01": true,  // protocol_violation
		"57P01": true,  // admin_shutdown
		"57P02": true,  // crash_shutdown
		"57P03": true,  // cannot_connect_now
		"53100": true,  // disk_full
		"57014": false, // query_canceled: a statement timeout
		"53200": false, // out_of_memory: a smaller transaction may fit
		"40001": false, // serialization_failure
		"23505": false, // unique_violation
		"22021": false, // character_not_in_repertoire
		"42501": false, // insufficient_privilege
		"PWF01": false, // a superseded claim
	} {
		if got := serverFailure(code); got != want {
			t.Errorf("serverFailure(%q) = %v, want %v", code, got, want)
		}
	}
}

// The pool is reset for an error that says its connections are gone (a
// restart, a crash, sessions ended), and only for such an error.
func TestConnectionLost(t *testing.T) {
	for name, c := range map[string]struct {
		err  error
		want bool
	}{
		"57P01 admin_shutdown": {&pgconn.PgError{Code: "57P01"}, true},
		"57P02 crash_shutdown": {&pgconn.PgError{Code: "57P02"}, true},
		"57P03":                {&pgconn.PgError{Code: "57P03"}, true},
		"08006":                {fmt.Errorf("persist: %w", &pgconn.PgError{Code: "08006"}), true},
		"network":              {&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, true},
		"EOF":                  {fmt.Errorf("receive: %w", io.ErrUnexpectedEOF), true},
		"57014 query_canceled": {&pgconn.PgError{Code: "57014"}, false},
		"25006 (reset apart)":  {&pgconn.PgError{Code: "25006"}, false},
		"23505":                {&pgconn.PgError{Code: "23505"}, false},
		"caller's cancel":      {fmt.Errorf("query: %w", context.Canceled), false},
		"caller's deadline":    {context.DeadlineExceeded, false},
		"not the connection's": {errors.New("some other failure"), false},
	} {
		if got := connectionLost(c.err); got != c.want {
			t.Errorf("%s: connectionLost(%v) = %v, want %v", name, c.err, got, c.want)
		}
	}
}
