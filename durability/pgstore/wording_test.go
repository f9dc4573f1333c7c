package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/pgstore"
)

// checkWording fails t unless err is a *durability.StoreError whose
// message names the store (its schema), says what happened and what to
// do, each as one of the phrases given.
func checkWording(t *testing.T, what string, err error, schema string, happened, todo string) {
	t.Helper()
	var se *durability.StoreError
	if !errors.As(err, &se) {
		t.Fatalf("%s: %v (%T), want a *durability.StoreError", what, err, err)
	}
	msg := err.Error()
	for _, want := range []string{"pgstore", "schema " + schema, happened, todo} {
		if !strings.Contains(msg, want) {
			t.Errorf("%s: %q does not say %q", what, msg, want)
		}
	}
}

// A write or claim refused by a server that takes no writes says which
// store, that the server takes no writes, and what to do.
func TestReadOnlyServer_ErrorSaysWhatToDo(t *testing.T) {
	s, _ := readOnlyStore(t)
	ctx := t.Context()
	err := s.PersistEvent(ctx, "a", 0, []byte("x"))
	checkWording(t, "write on a read-only server", err, s.Schema(), "takes no writes", "primary")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "25006" {
		t.Errorf("write on a read-only server: %v, want the server's error (25006) in the chain", err)
	}
	_, err = s.Claim(ctx, "k")
	checkWording(t, "claim on a read-only server", err, s.Schema(), "takes no writes", "primary")
}

// A call that needs a new connection the server refuses (it has as many
// as it allows: max_connections, or the role's limit) says which store,
// that the server refused the connection, and what to do.
func TestFullServer_ErrorSaysWhatToDo(t *testing.T) {
	ctx := t.Context()
	schema := freshSchema()
	open(t, &pgstore.Options{Schema: schema}).Close()
	appDSN := appRole(t, dsn, schema)
	s, err := pgstore.Open(ctx, appDSN, &pgstore.Options{Schema: schema, Committers: 1, MaxConns: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	release, err := pgstore.HoldConns(ctx, s, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	sql(t, "ALTER ROLE app_"+schema+" CONNECTION LIMIT 1")
	_, _, err = s.GetSnapshot(ctx, "a")
	checkWording(t, "read needing a connection the server refuses", err, schema, "refused a new connection", "MaxConns")
	err = s.PersistEvent(ctx, "a", 0, []byte("x"))
	checkWording(t, "write needing a connection the server refuses", err, schema, "refused a new connection", "MaxConns")
}

// A call whose context ends while every connection of the store's pool is
// in use says which store, that the pool was full, and what to do: a
// read, a claim, a Salvage, and a write whose committer waits for a
// connection (which was never sent, so its outcome is known).
func TestFullPool_ErrorSaysWhatToDo(t *testing.T) {
	s := open(t, &pgstore.Options{Committers: 1, MaxConns: 2})
	defer s.Close()
	release, err := pgstore.HoldConns(t.Context(), s, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	for _, c := range []struct {
		what string
		call func(context.Context) error
	}{
		{"read", func(ctx context.Context) error { _, _, err := s.GetSnapshot(ctx, "a"); return err }},
		{"claim", func(ctx context.Context) error { _, err := s.Claim(ctx, "k"); return err }},
		{"salvage", func(ctx context.Context) error { _, err := s.Salvage(ctx, "a"); return err }},
		{"write", func(ctx context.Context) error { return s.PersistEvent(ctx, "a", 0, []byte("x")) }},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		err := c.call(ctx)
		cancel()
		what := c.what + " with the pool full"
		checkWording(t, what, err, s.Schema(), "in use", "MaxConns")
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: %v, want the context's error in the chain", what, err)
		}
		if errors.Is(err, pgstore.ErrOutcomeUnknown) {
			t.Errorf("%s: %v, want no ErrOutcomeUnknown: nothing was sent", what, err)
		}
	}
}
