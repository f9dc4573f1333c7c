package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/polyweave/polyweave-go/durability"
)

// Defaults used for zero fields of [Options].
const (
	DefaultSchema       = "polyweave"
	DefaultMaxBatchSize = 4096
	DefaultCommitters   = 2
	DefaultMaxConns     = 8
	DefaultCloseTimeout = 30 * time.Second
	// MaxNameLen is the longest actor name (in bytes) the store accepts:
	// names are a primary-key column, and PostgreSQL's B-tree entries are
	// limited to about a third of a page.
	MaxNameLen = 1024
)

// The stores' common limit, durability.MaxNameLen, is at most this one's
// (the build fails otherwise).
const _ = uint(MaxNameLen - durability.MaxNameLen)

// Upper bounds of [Options] sizes; [Open] refuses larger values.
const (
	// MaxBatchSizeLimit bounds Options.MaxBatchSize: the write queue
	// holds that many writes, allocated up front.
	MaxBatchSizeLimit = 1 << 16
	// CommittersLimit bounds Options.Committers: each committer is a
	// goroutine started by Open and may hold a connection.
	CommittersLimit = 1024
	// MaxConnsLimit bounds Options.MaxConns, the largest pool pgx can size.
	MaxConnsLimit = math.MaxInt32
)

// errCloseGaveUp is the cause of the cancellation of the statements still
// in flight once Close has waited Options.CloseTimeout.
var errCloseGaveUp = errors.New("the store was closed, giving up what was still in flight")

// formatVersion is written into the schema's meta table when the store
// creates it and checked on open. Version 1: rows carry a CRC-32C.
const formatVersion = "1"

// Options configures [Open]. A nil *Options and the zero value both mean
// defaults; negative numbers, and sizes over their maximum (see
// MaxBatchSizeLimit), are rejected.
type Options struct {
	// Logger receives open/close and commit-failure records. Nil discards.
	Logger *slog.Logger

	// Schema is the PostgreSQL schema that holds the store's tables; it is
	// created when missing (which needs CREATE on the database). Several
	// stores (several applications, or tests) can share a database in
	// different schemas. It must be a plain lower-case identifier. Empty
	// means DefaultSchema.
	Schema string

	// MaxBatchSize caps how many writes share one transaction. Zero means
	// DefaultMaxBatchSize; at most MaxBatchSizeLimit.
	MaxBatchSize int

	// Committers is how many transactions may be in flight at once, each on
	// its own connection. Two lets one batch gather while the other
	// commits. Zero means DefaultCommitters; at most CommittersLimit.
	Committers int

	// MaxConns sizes the connection pool used for reads, claims and
	// commits; it must exceed Committers. Zero means
	// max(DefaultMaxConns, Committers+2); at most MaxConnsLimit.
	MaxConns int

	// CloseTimeout bounds how long [Store.Close], which takes no context,
	// waits for the writes handed to the store before it gives up those
	// still in flight (see Timeouts in the package doc). Zero means
	// DefaultCloseTimeout.
	CloseTimeout time.Duration

	// KeepHistory turns off compaction on PersistSnapshot (see
	// [durability.Store]). The default (false) compacts.
	KeepHistory bool
}

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

func (o *Options) withDefaults() (Options, error) {
	var c Options
	if o != nil {
		c = *o
	}
	switch {
	case c.MaxBatchSize < 0:
		return c, fmt.Errorf("pgstore: MaxBatchSize %d is negative", c.MaxBatchSize)
	case c.Committers < 0:
		return c, fmt.Errorf("pgstore: Committers %d is negative", c.Committers)
	case c.MaxConns < 0:
		return c, fmt.Errorf("pgstore: MaxConns %d is negative", c.MaxConns)
	case c.CloseTimeout < 0:
		return c, fmt.Errorf("pgstore: CloseTimeout %v is negative", c.CloseTimeout)
	case c.MaxBatchSize > MaxBatchSizeLimit:
		return c, fmt.Errorf("pgstore: MaxBatchSize %d is over the maximum %d", c.MaxBatchSize, MaxBatchSizeLimit)
	case c.Committers > CommittersLimit:
		return c, fmt.Errorf("pgstore: Committers %d is over the maximum %d", c.Committers, CommittersLimit)
	case c.MaxConns > MaxConnsLimit:
		return c, fmt.Errorf("pgstore: MaxConns %d is over the maximum %d", c.MaxConns, MaxConnsLimit)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Schema == "" {
		c.Schema = DefaultSchema
	}
	if !schemaName.MatchString(c.Schema) {
		return c, fmt.Errorf("pgstore: schema %q is not a plain lower-case identifier", c.Schema)
	}
	if c.MaxBatchSize == 0 {
		c.MaxBatchSize = DefaultMaxBatchSize
	}
	if c.Committers == 0 {
		c.Committers = DefaultCommitters
	}
	if c.CloseTimeout == 0 {
		c.CloseTimeout = DefaultCloseTimeout
	}
	if c.MaxConns == 0 {
		c.MaxConns = max(DefaultMaxConns, c.Committers+2)
	}
	if c.MaxConns <= c.Committers {
		return c, fmt.Errorf("pgstore: MaxConns %d must exceed Committers %d", c.MaxConns, c.Committers)
	}
	return c, nil
}

// Store is a [durability.Store] in a PostgreSQL database, shared by every
// process that opens it. Create it with [Open]; the zero value is not
// usable. All methods are safe for concurrent use.
type Store struct {
	pool        *pgxpool.Pool
	writePool   sync.Pool // of *write, made by newWrite: see newWrite
	dialer      *dialer   // the pool's connections, closed at once by Close when it must
	log         *slog.Logger
	q           queries
	schema      string
	name        string // names the store in errors: "pgstore host/database schema S"
	keepHistory bool
	maxBatch    int

	// mu guards closed and the sends on writes: Close takes it exclusively
	// to stop new operations; operations hold it shared while they start.
	mu     sync.RWMutex
	closed bool
	writes chan *write
	reads  sync.WaitGroup // reads in progress, waited for by Close

	committers sync.WaitGroup

	// life bounds every statement of the store besides its callers'
	// contexts: Close cancels it, with errCloseGaveUp, once it has waited
	// closeTimeout for the writes in flight.
	life         context.Context
	kill         context.CancelCauseFunc
	closeTimeout time.Duration

	// Group commit (see commitLoop): inside counts writers between the
	// start of their hand-off and its outcome, taken the writes in the
	// batches committers are running; gatherMu lets one committer gather
	// at a time, and wake tells it that a writer left.
	inside, taken atomic.Int64
	gatherMu      sync.Mutex
	wake          chan struct{}

	// Writes in doubt (see doubt.go): doubts counts, per actor name (or
	// claim key), the transactions that may still commit after their
	// write was reported ErrOutcomeUnknown, doubting all of them;
	// doubtWaiters counts the calls waiting for them to end; settlers
	// runs Store.settle, whose checks of the server checks numbers.
	doubtMu      sync.Mutex
	doubts       map[doubtKey]*doubt
	doubting     atomic.Int64
	doubtWaiters atomic.Int64
	settlers     sync.WaitGroup
	checks       atomic.Uint64
	// rerunWaiters counts the committers whose run again of a write
	// waits for the first run's transaction to end (see Store.try).
	rerunWaiters atomic.Int64

	closeOnce sync.Once
	closeErr  error

	// stats
	commits atomic.Int64
	written atomic.Int64
}

// Open connects to the database at dsn (a PostgreSQL connection string or
// URL, as pgx understands it), creates the store's schema, tables and
// function when they are missing (running no DDL when none is: see
// Privileges in the package doc), checks the format of existing ones, and
// starts the committers. ctx bounds the connection and schema setup only.
func Open(ctx context.Context, dsn string, opts *Options) (*Store, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgstore: parse connection string: %w", err)
	}
	cfg.MaxConns = int32(o.MaxConns)
	dial := newDialer(cfg.ConnConfig.DialFunc)
	cfg.ConnConfig.DialFunc = dial.DialContext
	cfg.AfterConnect = noteBackend
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: connect: %w", err)
	}
	s := &Store{
		writePool:   sync.Pool{New: newWrite},
		pool:        pool,
		dialer:      dial,
		log:         o.Logger,
		q:           newQueries(o.Schema),
		schema:      o.Schema,
		name:        fmt.Sprintf("pgstore %s/%s schema %s", cfg.ConnConfig.Host, cfg.ConnConfig.Database, o.Schema),
		keepHistory: o.KeepHistory,
		maxBatch:    o.MaxBatchSize,
		writes:      make(chan *write, o.MaxBatchSize),
		wake:        make(chan struct{}, 1),

		closeTimeout: o.CloseTimeout,
	}
	s.life, s.kill = context.WithCancelCause(context.Background())
	if err := s.createSchema(ctx); err != nil {
		s.kill(nil)
		pool.Close()
		return nil, err
	}
	for range o.Committers {
		s.committers.Go(s.commitLoop)
	}
	s.log.Info("pgstore opened", "schema", o.Schema, "host", cfg.ConnConfig.Host, "database", cfg.ConnConfig.Database)
	return s, nil
}

// createSchema checks that the schema, its tables and its fence function
// are in place and of this version, creates (or replaces) what is missing
// or out of date, and checks the format. When everything is in place it
// runs no DDL, so a role that may only use the store can open it.
func (s *Store) createSchema(ctx context.Context) error {
	steps, role, err := s.missing(ctx, s.pool)
	if err != nil {
		return err
	}
	if len(steps) == 0 {
		var version string
		err := s.pool.QueryRow(ctx, s.q.readFormat).Scan(&version)
		if err == nil {
			return checkFormat(s.schema, version)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("pgstore: read format of schema %q: %w", s.schema, err)
		}
	}
	// Something to create: serialized across processes by an advisory
	// lock, and looked at again under it.
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: set up schema %q: %w", s.schema, err)
	}
	defer tx.Rollback(ctx) // bounded by ctx: once it is done, the connection is closed, which rolls back
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", "polyweave pgstore schema "+s.schema); err != nil {
		return fmt.Errorf("pgstore: set up schema %q: %w", s.schema, err)
	}
	if steps, role, err = s.missing(ctx, tx); err != nil {
		return err
	}
	for _, st := range steps {
		if _, err := tx.Exec(ctx, st.stmt); err != nil {
			if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == insufficientPrivilege {
				return fmt.Errorf("pgstore: %s: role %q lacks the privilege (an Open by a role that has it sets the schema up; see Privileges in the package doc): %w", st.what, role, err)
			}
			return fmt.Errorf("pgstore: %s: %w", st.what, err)
		}
	}
	var version string
	if err := tx.QueryRow(ctx, s.q.format, formatVersion).Scan(&version); err != nil {
		return fmt.Errorf("pgstore: read format of schema %q: %w", s.schema, err)
	}
	if err := checkFormat(s.schema, version); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgstore: set up schema %q: %w", s.schema, err)
	}
	return nil
}

// insufficientPrivilege is the SQLSTATE of a statement the role may not
// run (a missing grant, or an object it does not own).
const insufficientPrivilege = "42501"

func checkFormat(schema, version string) error {
	if version != formatVersion {
		return fmt.Errorf("pgstore: schema %q holds format %q; this version reads format %q only", schema, version, formatVersion)
	}
	return nil
}

// ddlStep is one statement that sets part of the schema up, and what it
// does ("create table s.meta").
type ddlStep struct{ what, stmt string }

// missing looks the schema up in the system catalogs (readable by every
// role) and returns the statements that would create what is missing or
// replace what is out of date, in order, and the current role's name.
func (s *Store) missing(ctx context.Context, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) ([]ddlStep, string, error) {
	var (
		role                 string
		fnSrc, fnLang, fnRet *string
		hasSchema            bool
		tables               []string
	)
	if err := db.QueryRow(ctx, s.q.catalog, s.schema).Scan(&role, &hasSchema, &tables, &fnSrc, &fnLang, &fnRet); err != nil {
		return nil, "", fmt.Errorf("pgstore: look schema %q up: %w", s.schema, err)
	}
	var steps []ddlStep
	if !hasSchema {
		steps = append(steps, ddlStep{"create schema " + s.schema, s.q.createSchema})
	}
	for _, t := range s.q.createTables {
		if !slices.Contains(tables, t.name) {
			steps = append(steps, ddlStep{"create table " + s.schema + "." + t.name, t.stmt})
		}
	}
	fn := "function " + s.schema + ".check_fences"
	switch {
	case fnSrc == nil:
		steps = append(steps, ddlStep{"create " + fn, s.q.createFunction})
	case *fnSrc != s.q.functionBody || *fnLang != "plpgsql" || *fnRet != "void":
		steps = append(steps, ddlStep{"replace " + fn + " (it is not this version's)", s.q.createFunction})
	}
	return steps, role, nil
}

// Schema returns the PostgreSQL schema holding the store's tables.
func (s *Store) Schema() string { return s.schema }

// Close stops accepting operations, waits for queued writes and running
// reads, stops the committers and closes the connections. It waits at most
// Options.CloseTimeout for the writes and reads in flight (to a server
// that fell silent, say): then it cancels them, and those whose outcome is
// unknown fail with ErrOutcomeUnknown. The connections still open once
// CloseTimeout has passed (to a silent server, which does not answer
// their clean close) are closed at once. It is idempotent: later calls
// return what the first returned.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		deadline := time.Now().Add(s.closeTimeout)
		s.mu.Lock()
		s.closed = true
		close(s.writes)
		s.mu.Unlock()
		idle := make(chan struct{})
		go func() {
			s.committers.Wait()
			s.reads.Wait()
			close(idle)
		}()
		timer := time.NewTimer(s.closeTimeout)
		select {
		case <-idle:
		case <-timer.C:
			s.log.Warn("pgstore: Close gives up the writes and reads still in flight", "waited", s.closeTimeout)
			s.kill(errCloseGaveUp)
			<-idle
		}
		timer.Stop()
		s.kill(nil)
		s.settlers.Wait()
		// pgxpool's Close waits up to 15 seconds for each connection to a
		// silent server to close cleanly: past the deadline, they are
		// closed at once.
		pooled := make(chan struct{})
		go func() {
			s.pool.Close()
			close(pooled)
		}()
		timer = time.NewTimer(time.Until(deadline))
		select {
		case <-pooled:
		case <-timer.C:
			s.dialer.closeAll()
			<-pooled
		}
		timer.Stop()
		s.dialer.closeAll() // and the cancel requests pgx may still send
		s.log.Info("pgstore closed", "schema", s.schema, "commits", s.commits.Load(), "writes", s.written.Load())
	})
	return s.closeErr
}

// beginRead registers a read (or a claim, or a salvage) unless the store is closed, and
// returns the context to run it under: ctx, cancelled as well when Close
// gives up waiting (see Close). The read calls done when it ends.
func (s *Store) beginRead(ctx context.Context) (_ context.Context, done func(), _ error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, nil, durability.ErrClosed
	}
	s.reads.Add(1)
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.life, func() { cancel(context.Cause(s.life)) })
	return ctx, func() {
		stop()
		cancel(nil)
		s.reads.Done()
	}, nil
}

// validName reports whether name can be stored.
func validName(name string) bool { return name != "" && len(name) <= MaxNameLen }

// storeErr wraps err in a *durability.StoreError unless it already is one
// for this operation.
func storeErr(op, name string, err error) error {
	var se *durability.StoreError
	if errors.As(err, &se) && se.Op == op && se.Name == name {
		return err
	}
	return &durability.StoreError{Op: op, Name: name, Err: err}
}

// queries holds the SQL text with the schema name filled in.
type queries struct {
	catalog                         string
	createSchema, createFunction    string
	createTables                    []struct{ name, stmt string }
	functionBody                    string // check_fences's source, as the catalog holds it
	format, readFormat              string
	putEvents, putSnapshots         string
	putEventsIfAbsent               string
	putSnapshotsIfAbsent            string
	otherEvents, otherSnapshots     string
	compactEvents, compactSnapshots string
	deleteEvents, deleteSnapshots   string
	getEvents, getSnapshot          string
	checkFences, claim, epoch       string
	salvageSnapshots, salvageEvents string
	dropSnapshots, dropEvents       string
	txid, runStatus                 string
}

func newQueries(schema string) queries {
	sc := pgx.Identifier{schema}.Sanitize()
	t := func(name string) string { return sc + "." + name }
	// check_fences fails the transaction unless every key still has the
	// epoch given. FOR SHARE makes a concurrent claim wait for this
	// transaction, and this one see a claim committed before it.
	body := `
			DECLARE bad bytea; have bigint; want bigint;
			BEGIN
				PERFORM 1 FROM ` + t("fences") + ` WHERE key = ANY(keys) ORDER BY key FOR SHARE;
				SELECT c.key, f.epoch, c.epoch INTO bad, have, want
					FROM unnest(keys, epochs) AS c(key, epoch)
					LEFT JOIN ` + t("fences") + ` f ON f.key = c.key
					WHERE f.epoch IS DISTINCT FROM c.epoch LIMIT 1;
				IF FOUND THEN
					RAISE EXCEPTION USING ERRCODE = '` + fencedCode + `',
						MESSAGE = format('claim %s of %s superseded by claim %s', want, encode(bad, 'escape'), have);
				END IF;
			END `
	return queries{
		// The system catalogs, not to_regclass and the like, which fail
		// for a schema the role may not use.
		catalog: `SELECT current_user::text,
			EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1),
			ARRAY(SELECT c.relname::text FROM pg_catalog.pg_class c
				JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
				WHERE n.nspname = $1 AND c.relkind IN ('r', 'p')),
			f.prosrc, f.lanname::text, f.rettype
			FROM (SELECT 1) AS one LEFT JOIN (
				SELECT p.prosrc, l.lanname, p.prorettype::pg_catalog.regtype::text AS rettype
				FROM pg_catalog.pg_proc p
				JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
				JOIN pg_catalog.pg_language l ON l.oid = p.prolang
				WHERE n.nspname = $1 AND p.proname = 'check_fences'
					AND pg_catalog.pg_get_function_identity_arguments(p.oid) = 'keys bytea[], epochs bigint[]'
			) AS f ON true`,
		createSchema: "CREATE SCHEMA IF NOT EXISTS " + sc,
		// idx is the uint64 index with its top bit flipped, so that bigint
		// order is index order; crc is the CRC-32C of the row.
		createTables: []struct{ name, stmt string }{
			{"meta", "CREATE TABLE IF NOT EXISTS " + t("meta") + ` (key text PRIMARY KEY, value text NOT NULL)`},
			{"events", "CREATE TABLE IF NOT EXISTS " + t("events") + ` (
				name bytea NOT NULL, idx bigint NOT NULL, data bytea NOT NULL, crc integer NOT NULL,
				PRIMARY KEY (name, idx))`},
			{"snapshots", "CREATE TABLE IF NOT EXISTS " + t("snapshots") + ` (
				name bytea NOT NULL, idx bigint NOT NULL, data bytea NOT NULL, crc integer NOT NULL,
				PRIMARY KEY (name, idx))`},
			{"fences", "CREATE TABLE IF NOT EXISTS " + t("fences") + ` (key bytea PRIMARY KEY, epoch bigint NOT NULL)`},
		},
		createFunction: "CREATE OR REPLACE FUNCTION " + t("check_fences") + `(keys bytea[], epochs bigint[]) RETURNS void
			LANGUAGE plpgsql AS $$` + body + `$$`,
		functionBody: body,
		readFormat:   "SELECT value FROM " + t("meta") + " WHERE key = 'format'",
		format: "WITH ins AS (INSERT INTO " + t("meta") + ` (key, value) VALUES ('format', $1) ON CONFLICT (key) DO NOTHING RETURNING value)
			SELECT value FROM ins UNION ALL SELECT value FROM ` + t("meta") + ` WHERE key = 'format' LIMIT 1`,
		putEvents: "INSERT INTO " + t("events") + ` (name, idx, data, crc)
			SELECT * FROM unnest($1::bytea[], $2::bigint[], $3::bytea[], $4::integer[])
			ON CONFLICT (name, idx) DO UPDATE SET data = EXCLUDED.data, crc = EXCLUDED.crc`,
		putSnapshots: "INSERT INTO " + t("snapshots") + ` (name, idx, data, crc)
			SELECT * FROM unnest($1::bytea[], $2::bigint[], $3::bytea[], $4::integer[])
			ON CONFLICT (name, idx) DO UPDATE SET data = EXCLUDED.data, crc = EXCLUDED.crc`,
		// For a write run again (see Store.rerun): a row already stored
		// is locked and left as it is, and then compared.
		putEventsIfAbsent: "INSERT INTO " + t("events") + ` AS e (name, idx, data, crc)
			SELECT * FROM unnest($1::bytea[], $2::bigint[], $3::bytea[], $4::integer[])
			ON CONFLICT (name, idx) DO UPDATE SET crc = e.crc WHERE false`,
		putSnapshotsIfAbsent: "INSERT INTO " + t("snapshots") + ` AS e (name, idx, data, crc)
			SELECT * FROM unnest($1::bytea[], $2::bigint[], $3::bytea[], $4::integer[])
			ON CONFLICT (name, idx) DO UPDATE SET crc = e.crc WHERE false`,
		otherEvents: `SELECT e.name, e.idx FROM unnest($1::bytea[], $2::bigint[], $3::bytea[], $4::integer[]) AS c(name, idx, data, crc)
			JOIN ` + t("events") + ` e ON e.name = c.name AND e.idx = c.idx WHERE e.data <> c.data OR e.crc <> c.crc`,
		otherSnapshots: `SELECT e.name, e.idx FROM unnest($1::bytea[], $2::bigint[], $3::bytea[], $4::integer[]) AS c(name, idx, data, crc)
			JOIN ` + t("snapshots") + ` e ON e.name = c.name AND e.idx = c.idx WHERE e.data <> c.data OR e.crc <> c.crc`,
		compactEvents: "DELETE FROM " + t("events") + ` e USING unnest($1::bytea[], $2::bigint[]) AS c(name, idx)
			WHERE e.name = c.name AND e.idx < c.idx`,
		compactSnapshots: "DELETE FROM " + t("snapshots") + ` e USING unnest($1::bytea[], $2::bigint[]) AS c(name, idx)
			WHERE e.name = c.name AND e.idx < c.idx`,
		deleteEvents: "DELETE FROM " + t("events") + ` e USING unnest($1::bytea[], $2::bigint[]) AS c(name, idx)
			WHERE e.name = c.name AND e.idx <= c.idx`,
		deleteSnapshots: "DELETE FROM " + t("snapshots") + ` e USING unnest($1::bytea[], $2::bigint[]) AS c(name, idx)
			WHERE e.name = c.name AND e.idx <= c.idx`,
		getEvents: "SELECT idx, data, crc FROM " + t("events") + `
			WHERE name = $1 AND idx >= $2 AND idx <= $3 ORDER BY idx LIMIT $4`,
		getSnapshot: "SELECT idx, data, crc FROM " + t("snapshots") + ` WHERE name = $1 ORDER BY idx DESC LIMIT 1`,
		checkFences: "SELECT " + t("check_fences") + "($1::bytea[], $2::bigint[])",
		claim: "INSERT INTO " + t("fences") + ` AS f (key, epoch) VALUES ($1, 1)
			ON CONFLICT (key) DO UPDATE SET epoch = f.epoch + 1 RETURNING epoch`,
		epoch: "SELECT epoch FROM " + t("fences") + " WHERE key = $1",
		// Salvage: the snapshots newest first, the events from an index
		// on; then it drops every snapshot but the one kept ($2, NULL for
		// none) and every event outside the run kept ($2 to $3, NULL for
		// none).
		salvageSnapshots: "SELECT idx, data, crc FROM " + t("snapshots") + ` WHERE name = $1 ORDER BY idx DESC`,
		salvageEvents:    "SELECT idx, data, crc FROM " + t("events") + ` WHERE name = $1 AND idx >= $2 ORDER BY idx`,
		// A run's transaction, by its id ($3) when it is known, else by
		// its backend ($1, started at $2: see run); not asked of a server
		// in recovery, which cannot tell (see runState).
		txid: "SELECT pg_catalog.txid_current()",
		runStatus: `SELECT pg_catalog.pg_is_in_recovery(), CASE
			WHEN pg_catalog.pg_is_in_recovery() THEN ''
			WHEN $3::bigint <> 0 THEN coalesce(pg_catalog.txid_status($3::bigint), 'ended')
			WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity WHERE pid = $1::integer
				AND ($2::bigint = 0 OR (extract(epoch FROM backend_start) * 1000000)::bigint = $2::bigint))
			THEN 'in progress' ELSE 'ended' END`,
		dropSnapshots: "DELETE FROM " + t("snapshots") + ` WHERE name = $1 AND idx IS DISTINCT FROM $2::bigint`,
		dropEvents: "DELETE FROM " + t("events") + ` WHERE name = $1
			AND NOT coalesce(idx BETWEEN $2::bigint AND $3::bigint, false)`,
	}
}

// Stats counts what the store has committed since Open.
type Stats struct {
	Commits int64 // transactions committed
	Writes  int64 // writes they held
}

// Stats returns the counts so far.
func (s *Store) Stats() Stats {
	return Stats{Commits: s.commits.Load(), Writes: s.written.Load()}
}
