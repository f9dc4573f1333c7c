package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/polyweave/polyweave-go/cluster"
)

// refuse makes the store refuse every row written to its table (an insert
// or an update) with SQLSTATE code, as PostgreSQL refuses a role that
// lacks the privilege (42501) or a read-only transaction (25006).
func (b *breakableStore) refuse(t *testing.T, table, code string) {
	t.Helper()
	b.refuseAfter(t, table, code, 0)
}

// refuseAfter is refuse, where each refusal comes only after delay, as
// from a store that is slow to fail (a lock wait, a partitioned network).
func (b *breakableStore) refuseAfter(t *testing.T, table, code string, delay time.Duration) {
	t.Helper()
	fn := pgx.Identifier{b.schema, "refuse_" + table}.Sanitize()
	stmts := []string{
		"CREATE FUNCTION " + fn + "() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(" + fmt.Sprintf("%f", delay.Seconds()) +
			"); RAISE EXCEPTION 'writes to " + table + " refused' USING ERRCODE = '" + code + "'; END $$",
		"CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON " + pgx.Identifier{b.schema, table}.Sanitize() + " FOR EACH ROW EXECUTE FUNCTION " + fn + "()",
	}
	for _, s := range stmts {
		if _, err := b.conn.Exec(b.ctx, s); err != nil {
			t.Fatal(err)
		}
	}
}

// storeFailures is a slog handler that counts the warnings that an
// incarnation of a session could not run because its store failed.
type storeFailures struct{ n atomic.Int32 }

func (h *storeFailures) Enabled(context.Context, slog.Level) bool { return true }

func (h *storeFailures) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn && strings.Contains(r.Message, "could not run") {
		h.n.Add(1)
	}
	return nil
}

func (h *storeFailures) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *storeFailures) WithGroup(string) slog.Handler      { return h }

// TestMember_StoreRefusingWritesFailsAtOnce: a store that refuses the
// session's writes for good (the role lacks the privilege), whether the claim's or the loop's, is not a
// store that is down for a while: asking again cannot help. Run fails at
// once, with an error wrapping ErrStoreRefused that quotes the store's,
// rather than asking again until its ctx ends.
func TestMember_StoreRefusingWritesFailsAtOnce(t *testing.T) {
	for _, tc := range []struct{ table, code string }{
		{"events", "42501"}, // insufficient_privilege: the loop's first write
		{"fences", "42501"}, // the claim
	} {
		t.Run(tc.table+"/"+tc.code, func(t *testing.T) {
			leakCheck(t)
			b := newBreakableStore(t)
			b.refuse(t, tc.table, tc.code)
			var failures storeFailures
			m := startLoneMember(t, &cluster.Options{
				Store:   b.store,
				Session: sessionFunc(t, 1, b.side, nil),
				Hold:    200 * time.Millisecond,
				Logger:  slog.New(&failures),
			})
			ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
			defer cancel()
			_, err := m.Run(ctx, "s", firstRequest("s")...)
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Run returned its ctx's error after the store failed %d times (asking again each time) instead of the store's error at once: %.300v", failures.n.Load(), err)
			}
			if !errors.Is(err, cluster.ErrStoreRefused) || !strings.Contains(err.Error(), tc.code) {
				t.Fatalf("Run on a store that refuses writes to %s (SQLSTATE %s): %.300v; want an error wrapping ErrStoreRefused that quotes the store's", tc.table, tc.code, err)
			}
			if n := failures.n.Load(); n > 0 {
				t.Errorf("the session was asked for again after a refusal: %d incarnations could not run", n)
			}
			if got := b.side.runs(t); len(got) != 0 {
				t.Errorf("side effects %v, want none", got)
			}
			t.Log(err)
		})
	}
}

// TestMember_StoreFailingRetriesAreBounded: a store that keeps failing
// with an error that may pass is asked again StoreRetries times in a row,
// then Run fails with an error wrapping ErrStoreFailing that quotes the
// store's, rather than asking again for as long as its ctx lasts. That
// holds too for a store whose claims fail only after longer than Hold
// (500 ms here, with a Hold of 200 ms), so that each incarnation answers
// that it still runs first: one that has not claimed the session is no
// proof that the store works.
func TestMember_StoreFailingRetriesAreBounded(t *testing.T) {
	for _, c := range []struct {
		name   string
		breaks func(*testing.T, *breakableStore)
		quote  string // what the error quotes of the store's
	}{
		// Its fences table gone: every claim fails at once.
		{"at once", func(t *testing.T, b *breakableStore) { b.rename(t, "fences", "fences_away") }, "fences"},
		// serialization_failure, which may pass, after 500 ms.
		{"slowly", func(t *testing.T, b *breakableStore) { b.refuseAfter(t, "fences", "40001", 500*time.Millisecond) }, "40001"},
	} {
		t.Run(c.name, func(t *testing.T) {
			leakCheck(t)
			b := newBreakableStore(t)
			c.breaks(t, b)
			var failures storeFailures
			const retries = 2
			m := startLoneMember(t, &cluster.Options{
				Store:        b.store,
				Session:      sessionFunc(t, 1, b.side, nil),
				Hold:         200 * time.Millisecond,
				StoreRetries: retries,
				Logger:       slog.New(&failures),
			})
			ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
			defer cancel()
			_, err := m.Run(ctx, "s", firstRequest("s")...)
			if !errors.Is(err, cluster.ErrStoreFailing) || !strings.Contains(err.Error(), c.quote) {
				t.Fatalf("Run on a store that keeps failing, with StoreRetries %d: %.300v (after %d incarnations could not run); want an error wrapping ErrStoreFailing that quotes the store's", retries, err, failures.n.Load())
			}
			if n := failures.n.Load(); n != retries+1 {
				t.Errorf("%d incarnations could not run, want %d: the first and %d retries", n, retries+1, retries)
			}
		})
	}
}

// TestMember_StoreReadOnlyForAMomentIsRetried: a store that is read-only
// for a while (SQLSTATE 25006 read_only_sql_transaction, as a client sees
// it during a failover: a standby being promoted, a demoted writer behind
// a name not yet moved) refuses the claim or the loop's writes; that may
// pass. Run asks again, and once the store takes writes again the session
// completes.
func TestMember_StoreReadOnlyForAMomentIsRetried(t *testing.T) {
	for _, table := range []string{"events", "fences"} {
		t.Run(table, func(t *testing.T) {
			leakCheck(t)
			b := newBreakableStore(t)
			b.refuse(t, table, "25006")
			warned := make(chan struct{})
			m := startLoneMember(t, &cluster.Options{
				Store:   b.store,
				Session: sessionFunc(t, 1, b.side, nil),
				Hold:    200 * time.Millisecond,
				Linger:  -1,
				Logger:  slog.New(&onWarn{session: "s", warned: warned}),
			})
			done := runAllDone(b.ctx, m, "s")
			select {
			case <-warned: // an incarnation could not run: the failover ends
			case err := <-done:
				t.Fatalf("Run on a store read-only for a moment: %.300v, before the store took writes again; want it to ask again", err)
			}
			if _, err := b.conn.Exec(b.ctx, "DROP TRIGGER refuse ON "+pgx.Identifier{b.schema, table}.Sanitize()); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatalf("Run on a store read-only for a moment: %.300v; want the session's answer once it takes writes again", err)
			}
		})
	}
}
