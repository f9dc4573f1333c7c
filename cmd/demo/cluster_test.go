package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/durability/pgstore/pgtest"
	"go.uber.org/goleak"
)

// TestDemo_ClusterMovesTheSession runs the demo binary with -cluster and
// -store postgres://… (a throwaway server): three member processes; the
// member that hosts the session is killed after its first tool call, and
// the session resumes on another member (its second activation), which
// gives the scripted final answer without running the first call again.
func TestDemo_ClusterMovesTheSession(t *testing.T) {
	srv, err := pgtest.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	res, _ := runDemo(t, nil, "-cluster", "-store", srv.DSN)
	checkClusterRun(t, res)
}

// TestDemo_ClusterThrowawayPostgres runs the demo binary with -cluster and
// no -store, with a TMPDIR of mode 0700: the demo starts a throwaway
// PostgreSQL server of its own, which (as root) runs as an unprivileged
// user that cannot enter TMPDIR, so its folder is made elsewhere; the
// session moves as in TestDemo_ClusterMovesTheSession.
func TestDemo_ClusterThrowawayPostgres(t *testing.T) {
	tmp := filepath.Join(t.TempDir(), "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	res, _ := runDemo(t, []string{"TMPDIR=" + tmp, pgtest.EnvDSN + "="}, "-cluster")
	checkClusterRun(t, res)
	m := regexp.MustCompile(`PostgreSQL is up, in (\S+)`).FindStringSubmatch(res.stdout)
	if m == nil {
		t.Fatalf("the demo did not say where PostgreSQL runs:\n%s", res.stdout)
	}
	if root, under := os.Geteuid() == 0, strings.HasPrefix(m[1], tmp+string(filepath.Separator)); root == under {
		t.Errorf("running as root: %v; PostgreSQL ran in %s, under TMPDIR %s: %v", root, m[1], tmp, under)
	}
	if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
		t.Errorf("the demo left PostgreSQL's folder %s: %v", m[1], err)
	}
}

// checkClusterRun checks the output of a -cluster run: the session was
// activated on the member that was then killed, and again on another
// one, which answered without running the first call again.
func checkClusterRun(t *testing.T, res processResult) {
	t.Helper()
	if res.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	out := res.stdout
	activated := regexp.MustCompile(`\[member (\d)\] session \S+ activated here`).FindAllStringSubmatch(out, -1)
	killed := regexp.MustCompile(`killed member (\d) with SIGKILL`).FindStringSubmatch(out)
	switch {
	case len(activated) != 2 || killed == nil:
		t.Fatalf("want two activations and a kill:\n%s", out)
	case activated[0][1] != killed[1] || activated[1][1] == killed[1]:
		t.Errorf("activated on member %s, killed member %s, activated again on member %s:\n%s", activated[0][1], killed[1], activated[1][1], out)
	}
	for _, want := range []string{"(activation 2 of the session)", `wrote "Hello, Ada! Greetings from a Polyweave workspace."`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "write_file {"); n != 1 {
		t.Errorf("write_file ran %d times, want once (its result was stored before the kill):\n%s", n, out)
	}
}

// A -timeout that passes while -cluster sets up (here, before the store
// is opened) fails the run as a timeout does elsewhere: exit status 1 and
// "no final answer within -timeout", not the store's deadline error.
func TestRun_ClusterTimeoutDuringSetup(t *testing.T) {
	defer goleak.VerifyNone(t)
	srv, err := pgtest.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	_, _, err = runInProcess(t, "-cluster", "-store", srv.DSN, "-timeout", "1ns")
	var printed bytes.Buffer
	if exitCode(err, &printed) != 1 || !strings.HasPrefix(printed.String(), "demo: no final answer within -timeout 1ns (it passed while: pgstore: ") {
		t.Errorf("-cluster -timeout 1ns: %q, want exit 1 and the run's timeout failure", printed.String())
	}
}

// -cluster's members run every tool call and trace nothing: -approve,
// -undo and -trace with -cluster are refused before anything starts,
// rather than ignored.
func TestRun_ClusterRefusesApproveUndoTrace(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "x.jsonl")
	for _, args := range [][]string{
		{"-cluster", "-approve", "deny"},
		{"-cluster", "-approve", "ask"},
		{"-cluster", "-undo"},
		{"-cluster", "-trace", trace},
	} {
		stdout, _, err := runInProcess(t, args...)
		var usage *usageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), "-cluster does not combine with -approve, -undo or -trace") {
			t.Errorf("%v: err = %v, want a usage error naming -approve, -undo and -trace", args, err)
		}
		if stdout != "" {
			t.Errorf("%v: the run started:\n%s", args, stdout)
		}
	}
	if _, err := os.Stat(trace); !os.IsNotExist(err) {
		t.Errorf("-trace file was made: %v", err)
	}
}
