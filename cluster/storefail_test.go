package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/cluster"
	"github.com/polyweave/polyweave-go/durability/pgstore"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// TestMember_StoreFailureMidSessionIsNotASessionFailure: the store fails
// while a session runs (here its events table is missing for a moment,
// as during a failover: the write of a call's result is refused). The
// session has not failed: its incarnation stops, Run asks again, and a
// later activation resumes it from the store and completes it.
func TestMember_StoreFailureMidSessionIsNotASessionFailure(t *testing.T) {
	leakCheck(t)
	b := newBreakableStore(t)
	store, side, ctx, rename := b.store, b.side, b.ctx, b.rename
	warned := make(chan struct{})
	m := startLoneMember(t, &cluster.Options{
		Store: store,
		Session: sessionFunc(t, 2, side, func(string) hooks {
			return hooks{after: func(_ context.Context, call string) {
				if call == "c1" {
					rename(t, "events", "events_away") // the result's write fails
				}
			}}
		}),
		Hold:   200 * time.Millisecond,
		Linger: -1,
		Logger: slog.New(&onWarn{session: "s", warned: warned}),
	})
	done := runAllDone(ctx, m, "s")
	<-warned // the incarnation ended
	rename(t, "events_away", "events")
	if err := <-done; err != nil {
		t.Fatalf("Run, when the store failed for a moment mid-session: %v; want the session's answer", err)
	}
}

// TestMember_ConnectionsDroppedMidSessionIsNotASessionFailure: PostgreSQL drops the store's
// connections (a restart, a failover, an idle-session killer) while a
// session's call runs, so the write of its result fails. The session has
// not failed: Run asks again and the session resumes and completes.
func TestMember_ConnectionsDroppedMidSessionIsNotASessionFailure(t *testing.T) {
	leakCheck(t)
	b := newBreakableStore(t)
	store, side, ctx, conn := b.store, b.side, b.ctx, b.conn
	m := startLoneMember(t, &cluster.Options{
		Store: store,
		Session: sessionFunc(t, 2, side, func(string) hooks {
			return hooks{after: func(_ context.Context, call string) {
				if call != "c1" {
					return
				}
				// The store's pool (not the connections of the tests
				// that run beside this one).
				// (The select list runs for the rows WHERE keeps only.)
				rows, _ := conn.Query(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
					WHERE application_name = $1`, b.schema)
				dropped, err := pgx.CollectRows(rows, pgx.RowTo[bool])
				if err != nil || !slices.Contains(dropped, true) {
					t.Errorf("dropping the store's connections: %v, %v", dropped, err)
				}
				for { // until they are gone
					var n int
					if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
						WHERE application_name = $1`, b.schema).Scan(&n); err != nil || n == 0 {
						return
					}
				}
			}}
		}),
		Hold:   200 * time.Millisecond,
		Linger: -1,
	})
	res, err := m.Run(ctx, "s", firstRequest("s")...)
	if err != nil {
		t.Fatalf("Run, when the store's connections were dropped mid-session: %v; want the session's answer", err)
	}
	if res.Text != "All done." {
		t.Errorf("answer %q, want \"All done.\"", res.Text)
	}
}

// TestMember_SessionFailureIsStillAFailure: a loop that fails while its
// store works (here the model has no answer after the call) is a failed
// session, not one to ask again for, although the store's reads and writes
// went on around it.
func TestMember_SessionFailureIsStillAFailure(t *testing.T) {
	leakCheck(t)
	store := openStore(t, freshSchema())
	side := newSideFile(t)
	s := script(1)
	s.Turns = s.Turns[:1] // one call, then nothing: the loop fails
	model, err := scripted.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := startLoneMember(t, &cluster.Options{
		Store: store,
		Session: func(id string) (actors.Spec, *tools.LoopOptions, error) {
			return model.Spec("model"), &tools.LoopOptions{
				RouterOptions: tools.RouterOptions{Name: "session", Tools: []*tools.Tool{side.appendTool(id, hooks{})}},
				MaxIterations: 2,
			}, nil
		},
		Hold: 200 * time.Millisecond,
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = m.Run(ctx, "s", firstRequest("s")...)
	if !errors.Is(err, cluster.ErrSessionFailed) {
		t.Fatalf("Run of a session whose model fails: %v; want an error wrapping ErrSessionFailed", err)
	}
}

// breakableStore is a store on a fresh schema, with a side file, and a
// connection of the test's own to the database to break the store with;
// ctx ends after a minute, and t's cleanup closes the connection. The
// store's connections have the schema's name for application_name.
type breakableStore struct {
	schema string
	store  *pgstore.Store
	side   sideFile
	ctx    context.Context
	conn   *pgx.Conn
}

func newBreakableStore(t *testing.T) *breakableStore {
	t.Helper()
	b := &breakableStore{schema: freshSchema(), side: newSideFile(t)}
	b.store = openStoreAt(t, dsnNamed(b.schema), b.schema)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	b.ctx = ctx
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	b.conn = conn
	return b
}

// rename renames the store's table from to to, as if it were missing
// for a while (from "x" to "x_away") and back.
func (b *breakableStore) rename(t *testing.T, from, to string) {
	t.Helper()
	if _, err := b.conn.Exec(b.ctx, "ALTER TABLE "+pgx.Identifier{b.schema, from}.Sanitize()+" RENAME TO "+pgx.Identifier{to}.Sanitize()); err != nil {
		t.Fatal(err)
	}
}

// runAllDone runs session id of the test script (see firstRequest) on m
// in the background, and sends on the channel returned Run's error, or
// one for an answer that is not the script's last.
func runAllDone(ctx context.Context, m *cluster.Member, id string) <-chan error {
	done := make(chan error, 1)
	go func() {
		res, err := m.Run(ctx, id, firstRequest(id)...)
		if err == nil && res.Text != "All done." {
			err = fmt.Errorf("answer %q, want \"All done.\"", res.Text)
		}
		done <- err
	}()
	return done
}
