package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/durability/pgstore/pgtest"
	"github.com/polyweave/polyweave-go/internal/leakcheck"
)

// A -timeout that passes while -cluster sets up (here, before the store
// is opened) fails the run as a timeout does elsewhere: exit status 1 and
// "no final answer within -timeout", not the store's deadline error.
func TestRun_ClusterTimeoutDuringSetup(t *testing.T) {
	defer leakcheck.VerifyNone(t)
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

// A session id comes over the network: only one that names a folder of
// its own gets one, beneath the cluster's root.
func TestSessionDir(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	for _, id := range []string{"..", ".", "/", "x/..", "a/b", "../x", ".hidden", "", "a\x00b", strings.Repeat("a", maxSessionID+1)} {
		if dir, err := sessionDir(root, id); err == nil {
			t.Errorf("session %q: folder %s, want an error", id, dir)
		}
	}
	for _, id := range []string{"s-20261205-041500-a1b2c3", "k", "run_1.2"} {
		if dir, err := sessionDir(root, id); err != nil || dir != filepath.Join(root, id) {
			t.Errorf("session %q: %q, %v; want %s", id, dir, err, filepath.Join(root, id))
		}
	}
}
