package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
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

// A server in recovery (a standby) may not have replayed yet the
// transaction a run's id names, nor does it run the primary's backends:
// whatever it answers, the state of the run cannot be told from it.
func TestRunState_ServerInRecovery(t *testing.T) {
	future := &pgconn.PgError{Code: invalidParameterValue, Message: "transaction ID 1000 is in the future"}
	for _, c := range []struct {
		name string
		r    run
		st   string
		err  error
	}{
		{"id in the future", run{pid: 7, xid: 1000}, "", future},
		{"id aborted", run{pid: 7, xid: 1000}, aborted, nil},
		{"id committed", run{pid: 7, xid: 1000}, committed, nil},
		{"backend gone", run{pid: 7}, ended, nil},
	} {
		st, err := runState(c.r, true, c.st, c.err)
		if err == nil {
			t.Errorf("%s, the server in recovery: %q, want an error saying the server cannot tell", c.name, st)
		}
	}
	// Out of recovery, an id in the future is one the server never
	// assigned: its transaction never ran there.
	if st, err := runState(run{pid: 7, xid: 1000}, false, "", future); err != nil || st != aborted {
		t.Errorf("id in the future, the server not in recovery: %q, %v; want %q", st, err, aborted)
	}
}

// TestQuoteKeys: the warning about writes in doubt names their actors and
// claim keys escaped, clipped and at most quote.MaxNames of each, however
// many a transaction held and however long their names.
func TestQuoteKeys(t *testing.T) {
	var keys []doubtKey
	for i := range 100 {
		keys = append(keys, doubtKey{name: strings.Repeat(fmt.Sprint(i), 32<<10)}, doubtKey{claim: true, name: fmt.Sprintf("k%d\n", i)})
	}
	got := quoteKeys(keys)
	if len(got) > 20<<10 || strings.Contains(got, "\n") || !strings.HasPrefix(got, "actors ") ||
		!strings.Contains(got, "92 more (100 actor names in all); claims of \"k0\\n\"") || !strings.HasSuffix(got, "92 more (100 claim keys in all)") {
		t.Errorf("quoteKeys of 100 actors and 100 claims: %d bytes, %.200q…%q", len(got), got, got[max(0, len(got)-200):])
	}
	if got, want := quoteKeys([]doubtKey{{name: "a"}}), `actors "a"`; got != want {
		t.Errorf("quoteKeys of one actor = %s, want %s", got, want)
	}
}
