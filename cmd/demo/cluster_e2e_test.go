//go:build !race

// Runs the demo binary: left out under the race detector (see e2e_test.go).

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/durability/pgstore/pgtest"
)

// TestDemo_ClusterMovesTheSession runs the demo binary with -cluster and
// -store postgres://… (a throwaway server): three member processes; the
// member that hosts the session is killed after its first tool call, and
// the session resumes on another member (its second activation), which
// gives the scripted final answer without running the first call again.
func TestDemo_ClusterMovesTheSession(t *testing.T) {
	binaryTest(t)
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
	binaryTest(t)
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
