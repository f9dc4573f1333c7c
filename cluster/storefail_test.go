package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/cluster"
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
	schema := freshSchema()
	store := openStore(t, schema)
	side := newSideFile(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rename := func(from, to string) {
		t.Helper()
		if _, err := conn.Exec(ctx, "ALTER TABLE "+pgx.Identifier{schema, from}.Sanitize()+" RENAME TO "+pgx.Identifier{to}.Sanitize()); err != nil {
			t.Fatal(err)
		}
	}
	warned := make(chan struct{})
	m := startLoneMember(t, &cluster.Options{
		Store: store,
		Session: sessionFunc(t, 2, side, func(string) hooks {
			return hooks{after: func(_ context.Context, call string) {
				if call == "c1" {
					rename("events", "events_away") // the result's write fails
				}
			}}
		}),
		Hold:   200 * time.Millisecond,
		Linger: -1,
		Logger: slog.New(&onWarn{session: "s", warned: warned}),
	})
	done := make(chan error, 1)
	go func() {
		res, err := m.Run(ctx, "s", firstRequest("s")...)
		if err == nil && res.Text != "All done." {
			err = fmt.Errorf("answer %q, want \"All done.\"", res.Text)
		}
		done <- err
	}()
	<-warned // the incarnation ended
	rename("events_away", "events")
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
	schema := freshSchema()
	store := openStore(t, schema)
	side := newSideFile(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	m := startLoneMember(t, &cluster.Options{
		Store: store,
		Session: sessionFunc(t, 2, side, func(string) hooks {
			return hooks{after: func(_ context.Context, call string) {
				if call != "c1" {
					return
				}
				// Every other client backend: the store's pool.
				if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
					WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'`); err != nil {
					t.Error(err)
				}
				for { // until they are gone
					var n int
					if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
						WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'`).Scan(&n); err != nil || n == 0 {
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
