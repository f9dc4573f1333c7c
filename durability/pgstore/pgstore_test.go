package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/durabilitytest"
	"github.com/polyweave/polyweave-go/durability/pgstore"
	"github.com/polyweave/polyweave-go/durability/pgstore/pgtest"
	"github.com/polyweave/polyweave-go/internal/leakcheck"
)

// dsn connects to the throwaway server TestMain starts.
var dsn string

func TestMain(m *testing.M) {
	srv, err := pgtest.Start(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dsn = srv.DSN
	code := m.Run()
	if err := srv.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if code == 0 {
		if err := leakcheck.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var schemas atomic.Int64

// freshSchema names a schema no other test uses.
func freshSchema() string { return fmt.Sprintf("t%d_%d", os.Getpid(), schemas.Add(1)) }

func open(t *testing.T, o *pgstore.Options) *pgstore.Store {
	t.Helper()
	var opts pgstore.Options
	if o != nil {
		opts = *o
	}
	if opts.Schema == "" {
		opts.Schema = freshSchema()
	}
	s, err := pgstore.Open(t.Context(), dsn, &opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// sql runs a statement on the test server, outside any store.
func sql(t *testing.T, stmt string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(t.Context()))
	if _, err := conn.Exec(t.Context(), stmt, args...); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}

// The conformance suites and the damage test run in parallel, each on
// schemas of its own: they mostly wait on the server's round trips. The
// tests that restart the server, or make it refuse writes, are not
// parallel, so they run before these start.
func TestStore_Conformance(t *testing.T) {
	t.Parallel()
	durabilitytest.Run(t, func(t *testing.T) durability.Store { return open(t, nil) })
}

// TestStore_NameLimit: names up to MaxNameLen bytes.
func TestStore_NameLimit(t *testing.T) {
	t.Parallel()
	durabilitytest.RunNameLimit(t, func(t *testing.T) durability.Store { return open(t, nil) }, pgstore.MaxNameLen)
}

// The fenced view honours the same contract while its claim is current.
// Damage inside stored values, at seeded offsets, made with SQL on the
// server: every read of the damaged row fails, every other read returns
// what was written.
func TestStore_DamagedValues(t *testing.T) {
	t.Parallel()
	var schema string
	open := func(t *testing.T) durability.Store {
		s := open(t, nil)
		schema = s.Schema()
		return s
	}
	durabilitytest.RunDamagedValues(t, 20, open, damageRow(&schema))
}

// damageRow returns a durabilitytest.Damage that flips one bit of a row's
// data with SQL on the server, in the schema *schema names when it runs.
func damageRow(schema *string) durabilitytest.Damage {
	return func(t *testing.T, s durability.Store, name string, kind durability.RecordKind, index uint64, offset int) (durability.Store, error) {
		table := "events"
		if kind == durability.RecordSnapshot {
			table = "snapshots"
		}
		sql(t, fmt.Sprintf("UPDATE %s.%s SET data = set_byte(data, $3, get_byte(data, $3) # 1) WHERE name = $1 AND idx = $2", *schema, table),
			[]byte(name), int64(index^(1<<63)), offset)
		return s, nil
	}
}

func TestClaim_Conformance(t *testing.T) {
	t.Parallel()
	durabilitytest.Run(t, func(t *testing.T) durability.Store {
		s := open(t, nil)
		t.Cleanup(func() { s.Close() })
		c, err := s.Claim(t.Context(), "session")
		if err != nil {
			t.Fatal(err)
		}
		return c
	})
}

func TestOpen_Options(t *testing.T) {
	for _, o := range []pgstore.Options{
		{Schema: "Bad-Name"},
		{Schema: "x; DROP TABLE y"},
		{MaxBatchSize: -1},
		{Committers: -1},
		{MaxConns: -1},
		{Committers: 4, MaxConns: 4},
		{CloseTimeout: -1},
	} {
		if s, err := pgstore.Open(t.Context(), dsn, &o); err == nil {
			s.Close()
			t.Errorf("Open(%+v) accepted", o)
		}
	}
	if _, err := pgstore.Open(t.Context(), "postgres://nobody@127.0.0.1:1/x?connect_timeout=2", nil); err == nil {
		t.Error("Open of an unreachable server succeeded")
	}
}

// Members starting together create the schema once, without errors.
func TestOpen_Concurrent(t *testing.T) {
	schema := freshSchema()
	var wg sync.WaitGroup
	stores := make([]*pgstore.Store, 6)
	errs := make([]error, len(stores))
	for i := range stores {
		wg.Go(func() { stores[i], errs[i] = pgstore.Open(t.Context(), dsn, &pgstore.Options{Schema: schema}) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d: %v", i, err)
			continue
		}
		defer stores[i].Close()
	}
	if t.Failed() {
		return
	}
	// What one writes, another reads.
	if err := stores[0].PersistEvent(t.Context(), "shared", 0, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	var got string
	if err := stores[5].GetEvents(t.Context(), "shared", 0, 0, func(_ uint64, d []byte) error { got = string(d); return nil }); err != nil || got != "hello" {
		t.Errorf("other store read %q, %v", got, err)
	}
}

func TestOpen_RefusesOtherFormat(t *testing.T) {
	s := open(t, nil)
	schema := s.Schema()
	s.Close()
	sql(t, fmt.Sprintf("UPDATE %s.meta SET value = '7' WHERE key = 'format'", schema))
	_, err := pgstore.Open(t.Context(), dsn, &pgstore.Options{Schema: schema})
	if err == nil || !strings.Contains(err.Error(), `format "7"`) {
		t.Errorf("Open of a format-7 schema: %v, want an error naming the format", err)
	}
}

// Concurrent writers share transactions.
func TestStore_GroupCommit(t *testing.T) {
	s := open(t, nil)
	defer s.Close()
	const writers, each = 64, 20
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range uint64(each) {
				if err := s.PersistEvent(t.Context(), fmt.Sprint("w", w), i, []byte("x")); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	st := s.Stats()
	if st.Writes != writers*each {
		t.Fatalf("stats count %d writes, want %d", st.Writes, writers*each)
	}
	// A committer waits for every writer inside a call that is not in the
	// other committer's batch: about 32 writes a transaction (the first
	// ones fewer, while the writers start). Taking only what was queued
	// when the first write came gave about 20.
	if st.Commits*8 > st.Writes {
		t.Errorf("%d writes took %d transactions: writers are not sharing them", st.Writes, st.Commits)
	}
	t.Logf("%d writes in %d transactions", st.Writes, st.Commits)
}

func checkCause(t *testing.T, err error, cause error) *durability.StoreError {
	t.Helper()
	var se *durability.StoreError
	if !errors.As(err, &se) || !errors.Is(err, cause) {
		t.Fatalf("error %v, want a *durability.StoreError caused by %v", err, cause)
	}
	return se
}

// A stale incarnation cannot write after a newer one took over, and its
// refused write does not take other writes of the same transaction down.
func TestClaim_StaleWriterFenced(t *testing.T) {
	s := open(t, nil)
	defer s.Close()
	ctx := t.Context()
	old, err := s.Claim(ctx, "session-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := old.PersistEvent(ctx, "session-1/loop", 0, []byte("old 0")); err != nil {
		t.Fatal(err)
	}
	cur, err := s.Claim(ctx, "session-1")
	if err != nil {
		t.Fatal(err)
	}
	if cur.Epoch() != old.Epoch()+1 {
		t.Errorf("epochs %d then %d", old.Epoch(), cur.Epoch())
	}
	se := checkCause(t, old.PersistEvent(ctx, "session-1/loop", 1, []byte("old 1")), pgstore.ErrFenced)
	if se.Op != durability.OpPersistEvent || se.Name != "session-1/loop" || durability.IsRetryable(se) {
		t.Errorf("fenced error %+v", se)
	}
	checkCause(t, old.PersistSnapshot(ctx, "session-1/loop", 1, []byte("old")), pgstore.ErrFenced)
	checkCause(t, old.DeleteEvents(ctx, "session-1/loop", 5), pgstore.ErrFenced)
	if err := cur.PersistEvent(ctx, "session-1/loop", 1, []byte("new 1")); err != nil {
		t.Fatal(err)
	}
	// A claim of another key is untouched.
	other, err := s.Claim(ctx, "session-2")
	if err != nil {
		t.Fatal(err)
	}
	if err := other.PersistEvent(ctx, "session-2/loop", 0, []byte("x")); err != nil {
		t.Fatal(err)
	}

	// Stale writes racing current ones in shared transactions: every stale
	// one fails, every current one succeeds.
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			name := fmt.Sprint("racer-", i)
			for j := range uint64(10) {
				var err error
				if i%2 == 0 {
					err = old.PersistEvent(ctx, name, j, []byte("stale"))
					if !errors.Is(err, pgstore.ErrFenced) {
						t.Errorf("stale write: %v", err)
					}
				} else if err = cur.PersistEvent(ctx, name, j, []byte("current")); err != nil {
					t.Errorf("current write: %v", err)
				}
			}
		})
	}
	wg.Wait()

	var got []string
	if err := s.GetEvents(ctx, "session-1/loop", 0, 0, func(_ uint64, d []byte) error { got = append(got, string(d)); return nil }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "old 0,new 1" {
		t.Errorf("session events %q, want the old incarnation's first and the new one's second", got)
	}
	for i := 0; i < 32; i += 2 {
		if err := s.GetEvents(ctx, fmt.Sprint("racer-", i), 0, 0, func(uint64, []byte) error {
			return errors.New("a fenced write was stored")
		}); err != nil {
			t.Error(err)
		}
	}
	if e, err := s.Epoch(ctx, "session-1"); err != nil || e != cur.Epoch() {
		t.Errorf("Epoch = %d, %v; want %d", e, err, cur.Epoch())
	}
}

// A takeover while the old incarnation is busy writing: once Claim has
// returned, no write of the old one commits, and every write of the old one
// that reported success is stored.
func TestClaim_TakeoverWhileWriting(t *testing.T) {
	s := open(t, nil)
	defer s.Close()
	ctx := t.Context()
	old, err := s.Claim(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	var claimed atomic.Bool
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[string]bool{}
	started := make(chan struct{}, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := uint64(0); ; i++ {
				after := claimed.Load() // the claim had returned before this write began
				err := old.PersistEvent(ctx, fmt.Sprint("w", w), i, []byte("x"))
				if i == 0 {
					started <- struct{}{}
				}
				if errors.Is(err, pgstore.ErrFenced) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				if after {
					t.Errorf("writer %d: write %d began after the newer claim and committed", w, i)
				}
				mu.Lock()
				acked[fmt.Sprint("w", w, "/", i)] = true
				mu.Unlock()
			}
		})
	}
	for range 8 {
		<-started
	}
	if _, err := s.Claim(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	claimed.Store(true)
	wg.Wait()
	stored := 0
	for w := range 8 {
		if err := s.GetEvents(ctx, fmt.Sprint("w", w), 0, 0, func(i uint64, _ []byte) error {
			if !acked[fmt.Sprint("w", w, "/", i)] {
				return fmt.Errorf("w%d event %d stored but its write failed", w, i)
			}
			stored++
			return nil
		}); err != nil {
			t.Error(err)
		}
	}
	if stored != len(acked) {
		t.Errorf("%d writes acknowledged, %d stored", len(acked), stored)
	}
}

// Damage to stored rows is detected on read, never served: flipped bytes
// in values, changed indexes, names and checksums, at seeded offsets.
func TestStore_DamagedRowsRefused(t *testing.T) {
	s := open(t, nil)
	defer s.Close()
	ctx := t.Context()
	schema := s.Schema()
	rng := rand.New(rand.NewPCG(16, 18))
	value := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	const names = 24
	written := map[string][]byte{}
	for n := range names {
		name := fmt.Sprint("actor-", n)
		for i := range uint64(5) {
			v := value(1 + rng.IntN(300))
			if err := s.PersistEvent(ctx, name, i, v); err != nil {
				t.Fatal(err)
			}
			written[fmt.Sprint(name, "/", i)] = v
		}
		v := value(1 + rng.IntN(300))
		if err := s.PersistSnapshot(ctx, name, 0, v); err != nil {
			t.Fatal(err)
		}
		written[name+"/snap"] = v
	}
	// Each actor gets one kind of damage to one of its rows.
	damages := []string{
		// flip one bit of one byte of the value, at a seeded offset
		"UPDATE %[1]s.events SET data = set_byte(data, %[3]d %% length(data), get_byte(data, %[3]d %% length(data)) # %[4]d) WHERE name = $1 AND idx = %[2]s",
		"UPDATE %[1]s.snapshots SET data = set_byte(data, %[3]d %% length(data), get_byte(data, %[3]d %% length(data)) # %[4]d) WHERE name = $1",
		// cut the value short
		"UPDATE %[1]s.events SET data = substring(data from 1 for length(data) - 1) WHERE name = $1 AND idx = %[2]s",
		// the checksum itself
		"UPDATE %[1]s.events SET crc = crc # %[4]d WHERE name = $1 AND idx = %[2]s",
		// a row moved to another index
		"UPDATE %[1]s.events SET idx = idx + 10 WHERE name = $1 AND idx = %[2]s",
	}
	damaged := map[string]bool{}
	for n := range names {
		name := fmt.Sprint("actor-", n)
		kind := n % len(damages)
		idx := rng.IntN(5)
		if kind == 4 {
			idx = 4
		}
		// indexes are stored biased: bias(i) = i - 2^63 for small i
		stmt := fmt.Sprintf(damages[kind], schema, fmt.Sprintf("(%d - 9223372036854775807 - 1)", idx), rng.IntN(1000), 1<<rng.IntN(8))
		sql(t, stmt, []byte(name))
		if kind == 1 {
			damaged[name+"/snap"] = true
		} else {
			damaged[name] = true
		}
	}
	for n := range names {
		name := fmt.Sprint("actor-", n)
		err := s.GetEvents(ctx, name, 0, 0, func(i uint64, d []byte) error {
			if w := written[fmt.Sprint(name, "/", i)]; string(w) != string(d) {
				return fmt.Errorf("served event %d different from what was written", i)
			}
			return nil
		})
		if damaged[name] {
			se := checkCause(t, err, durability.ErrDamaged)
			if se.Name != name || se.Op != durability.OpGetEvents || !strings.Contains(err.Error(), "event ") {
				t.Errorf("damage error %v does not name the actor and the event", err)
			}
		} else if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		snap, ok, err := s.GetSnapshot(ctx, name)
		if damaged[name+"/snap"] {
			se := checkCause(t, err, durability.ErrDamaged)
			if se.Name != name || !strings.Contains(err.Error(), "snapshot 0") {
				t.Errorf("damage error %v does not name the actor and the snapshot", err)
			}
		} else if err != nil || !ok || string(snap.Data) != string(written[name+"/snap"]) {
			t.Errorf("%s snapshot: ok %v, %v", name, ok, err)
		}
	}
}
