package pgstore_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/polyweave/polyweave-go/durability/pgstore"
)

// dsnForms runs test once with the test server's connection string as a
// URL and once as key=value pairs, the two forms pgx takes.
func dsnForms(t *testing.T, test func(t *testing.T, base string)) {
	for _, form := range []string{"url", "keyword"} {
		t.Run(form, func(t *testing.T) {
			base := dsn
			if form == "keyword" {
				base = keywordDSN(t, dsn)
			}
			test(t, base)
		})
	}
}

// keywordDSN returns the test server's connection string as key=value
// pairs.
func keywordDSN(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	kv := fmt.Sprintf("host=%s port=%d dbname=%s user=%s", keywordValue(cfg.Host), cfg.Port, keywordValue(cfg.Database), keywordValue(cfg.User))
	if cfg.Password != "" {
		kv += " password=" + keywordValue(cfg.Password)
	}
	if cfg.TLSConfig == nil {
		kv += " sslmode=disable"
	}
	return kv
}

// appRole creates a login role that holds what the package doc lists as
// the privileges to use an existing store in schema (none to create one),
// dropped again when the test ends, and returns a connection string for
// it: base's, as another role.
func appRole(t *testing.T, base, schema string) string {
	t.Helper()
	role, password := "app_"+schema, "pw_"+schema
	roleDSN := asRole(base, role, password)
	sql(t, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", role, password))
	t.Cleanup(func() { // t.Context() is cancelled by now
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		for _, stmt := range []string{"DROP OWNED BY " + role, "DROP ROLE " + role} {
			if _, err := conn.Exec(context.Background(), stmt); err != nil {
				t.Errorf("%s: %v", stmt, err)
			}
		}
	})
	sql(t, "GRANT USAGE ON SCHEMA "+schema+" TO "+role)
	sql(t, "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "+schema+" TO "+role)
	sql(t, "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA "+schema+" TO "+role)
	conn, err := pgx.Connect(t.Context(), roleDSN)
	if err != nil {
		t.Fatalf("connect as %s: %v", role, err)
	}
	defer conn.Close(context.WithoutCancel(t.Context()))
	var user string
	if err := conn.QueryRow(t.Context(), "SELECT current_user::text").Scan(&user); err != nil || user != role {
		t.Fatalf("connected with %q as %q (%v), want %s", roleDSN, user, err, role)
	}
	return roleDSN
}

// asRole returns the connection string base (a URL or key=value pairs)
// with role and password in place of its own.
func asRole(base, role, password string) string {
	if u, err := url.Parse(base); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.User = url.UserPassword(role, password)
		return u.String()
	}
	// Of a key given twice, the last counts.
	return fmt.Sprintf("%s user=%s password=%s", base, keywordValue(role), keywordValue(password))
}

// keywordValue quotes v for a key=value connection string.
func keywordValue(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// A role granted only what the store uses at run time opens a store that
// an owner created, and writes through a claim: Open runs no DDL when
// everything is in place.
func TestOpen_LeastPrivilegeRole(t *testing.T) { dsnForms(t, testLeastPrivilegeRole) }

func testLeastPrivilegeRole(t *testing.T, base string) {
	schema := freshSchema()
	open(t, &pgstore.Options{Schema: schema}).Close()
	appDSN := appRole(t, base, schema)
	s, err := pgstore.Open(t.Context(), appDSN, &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatalf("Open as a role granted everything the store uses, on an existing schema: %v", err)
	}
	defer s.Close()
	c, err := s.Claim(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.PersistEvent(t.Context(), "k", 0, []byte("x")); err != nil {
		t.Fatal(err)
	}
	var got string
	if err := s.GetEvents(t.Context(), "k", 0, 0, func(_ uint64, d []byte) error { got = string(d); return nil }); err != nil || got != "x" {
		t.Errorf("read back %q, %v", got, err)
	}
}

// When something is missing or out of date, Open as a role that may not
// create it fails naming what it was creating and the role's missing
// privilege; once an owner has opened the store, the role opens it.
func TestOpen_LeastPrivilegeRoleCannotCreate(t *testing.T) {
	dsnForms(t, testLeastPrivilegeRoleCannotCreate)
}

func testLeastPrivilegeRoleCannotCreate(t *testing.T, base string) {
	schema := freshSchema()
	open(t, &pgstore.Options{Schema: schema}).Close()
	appDSN := appRole(t, base, schema)
	role := "app_" + schema
	openAsApp := func() error {
		s, err := pgstore.Open(t.Context(), appDSN, &pgstore.Options{Schema: schema})
		if err == nil {
			s.Close()
		}
		return err
	}
	for _, c := range []struct{ change, want string }{
		{"DROP TABLE " + schema + ".snapshots", "table " + schema + ".snapshots"},
		{"CREATE OR REPLACE FUNCTION " + schema + ".check_fences(keys bytea[], epochs bigint[]) RETURNS void LANGUAGE sql AS 'SELECT'",
			"function " + schema + ".check_fences"},
	} {
		sql(t, c.change)
		err := openAsApp()
		if err == nil {
			t.Fatalf("after %s: Open as %s succeeded", c.change, role)
		}
		if msg := err.Error(); !strings.Contains(msg, c.want) || !strings.Contains(msg, role) || !strings.Contains(msg, "privilege") {
			t.Errorf("after %s: Open as %s: %v; want an error naming %q, the role and its missing privilege", c.change, role, err, c.want)
		}
		open(t, &pgstore.Options{Schema: schema}).Close()
		sql(t, "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "+schema+" TO "+role)
		if err := openAsApp(); err != nil {
			t.Errorf("after an owner's Open: Open as %s: %v", role, err)
		}
	}
	other := freshSchema()
	_, err := pgstore.Open(t.Context(), appDSN, &pgstore.Options{Schema: other})
	if err == nil || !strings.Contains(err.Error(), "schema "+other) || !strings.Contains(err.Error(), "privilege") {
		t.Errorf("Open as %s of a missing schema: %v; want an error naming the schema and the missing privilege", role, err)
	}
}
