//go:build !race

// Runs the demo binary: left out under the race detector (see e2e_test.go).

package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/cluster"
	"github.com/polyweave/polyweave-go/durability/pgstore"
	"github.com/polyweave/polyweave-go/durability/pgstore/pgtest"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/tools"
)

// TestDemo_ClusterMovesTheSession runs the demo binary with -cluster and
// -store postgres://… (a throwaway server): three member processes; the
// member that hosts the session is killed while its run_command call
// runs, and the session resumes on another member (its second
// activation), which answers that call as interrupted and gives the
// scripted final answer without running the first call again.
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
// activated on the member that was then killed while it ran run_command,
// and again on another one, which answered that call as interrupted and
// went on without running the first call again.
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
	// The last line says where the session's files are (or were).
	if !regexp.MustCompile(`kept in PostgreSQL \(schema \S+\); its files (are in /\S+\n|were in /\S+ \(removed at exit; -workspace keeps them\)\n)`).MatchString(out) {
		t.Errorf("the last line does not say where the session's files are:\n%s", out)
	}
	if n := strings.Count(out, "write_file {"); n != 1 {
		t.Errorf("write_file ran %d times, want once (its result was stored before the kill):\n%s", n, out)
	}
	// The kill falls while run_command runs, as the README says: the
	// member that was killed showed write_file's result and then
	// run_command running; the next member answers run_command as
	// interrupted, and the model runs it again there.
	at := strings.Index(out, "killed member")
	for _, re := range []string{`\[member (\d)\] session \S+: write_file \{.*→ \{"success":true`, `\[member (\d)\] session \S+: run_command \{.*\} is running`} {
		m := regexp.MustCompile(re).FindStringSubmatchIndex(out)
		if m == nil || at < m[1] || killed == nil || out[m[2]:m[3]] != killed[1] {
			t.Errorf("want %s from the member killed after it, before the kill:\n%s", re, out)
		}
	}
	results := regexp.MustCompile(`\[member (\d)\] session \S+: run_command \{.*→ \{"success":(\w+),(.*)`).FindAllStringSubmatch(out, -1)
	switch {
	case len(results) != 2:
		t.Errorf("want two run_command results (interrupted, then run again), got %d:\n%s", len(results), out)
	case results[0][1] == killed[1] || results[0][2] != "false" || !strings.Contains(results[0][3], string(tools.FailureInterrupted)):
		t.Errorf("want run_command answered as interrupted by the next member:\n%s", out)
	case results[1][1] != results[0][1] || results[1][2] != "true":
		t.Errorf("want run_command run again, with success, by the next member:\n%s", out)
	}
}

// A session id comes over the network from anyone who reaches a member:
// ".." gets no workspace outside the cluster's root (the member refuses
// it), and nothing is written beside the root.
func TestDemo_ClusterSessionIDStaysUnderRoot(t *testing.T) {
	binaryTest(t)
	srv, err := pgtest.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, err := pgstore.Open(ctx, srv.DSN, &pgstore.Options{Schema: clusterSchema})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()

	parent := t.TempDir()
	root := filepath.Join(parent, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	ports, err := freeLoopbackPorts(1)
	if err != nil {
		t.Fatal(err)
	}
	hosts := []string{"127.0.0.1:" + strconv.Itoa(ports[0])}
	var mu sync.Mutex
	var lines []string
	m, err := startMember(demoBin, memberConfig{Index: 1, Port: ports[0], Hosts: hosts, DSN: srv.DSN,
		Schema: clusterSchema, Root: root}, func(line string) {
		mu.Lock()
		lines = append(lines, line)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.stop()
	select {
	case <-m.ready:
	case <-ctx.Done():
		t.Fatal("the member did not start")
	}
	client, err := cluster.Start(&cluster.Options{Client: true, Provider: cluster.Automanaged(0, hosts, 300*time.Millisecond),
		Store: store, Hold: 300 * time.Millisecond, RequestTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.WithoutCancel(ctx))

	_, err = client.Run(ctx, "..", messages.RawParam("", models.ParamMessages,
		models.EncodeMessages([]models.Message{models.UserMessage("hi")})))
	if err == nil {
		t.Errorf("Run(\"..\") succeeded: the member ran a session whose id names no folder of its own")
	}

	mu.Lock()
	defer mu.Unlock()
	re := regexp.MustCompile(`session \.\. activated here; it works in (\S+)`)
	for _, l := range lines {
		if mm := re.FindStringSubmatch(l); mm != nil {
			rel, rerr := filepath.Rel(root, mm[1])
			if rerr != nil || !filepath.IsLocal(rel) || rel == "." {
				t.Errorf("session \"..\" got the workspace %s, not a folder of its own under the cluster root %s", mm[1], root)
			}
		}
	}
	for _, f := range []string{"hello.sh", "greeting.txt"} {
		if _, err := os.Stat(filepath.Join(parent, f)); err == nil {
			t.Errorf("the session's agent wrote %s beside the cluster root, in %s", f, parent)
		}
	}
}
