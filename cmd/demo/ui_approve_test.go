//go:build !race

// Runs the demo binary: left out under the race detector (see e2e_test.go).

package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/inspect"
)

var (
	liveViewLine = regexp.MustCompile(`live view at (http://\S+) `)
	askLine      = regexp.MustCompile(`(run_command call_\S+) .*run it\?`)
)

// liveDemo is a demo process the test talks to: its terminal (stdin,
// the transcript) and its live view.
type liveDemo struct {
	t      *testing.T
	cmd    *exec.Cmd
	ctx    context.Context
	stdin  io.WriteCloser
	stdout *syncBuffer
	stderr *syncBuffer
	base   string // the live view's URL, once seen
	client *http.Client
}

// startLiveDemo starts the demo with args; it is interrupted at the end
// of the test (and must then exit cleanly) unless killed before.
func startLiveDemo(t *testing.T, args ...string) *liveDemo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), demoProcessLimit)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, demoBin, args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	d := &liveDemo{t: t, cmd: cmd, ctx: ctx, stdin: stdin, stdout: newSyncBuffer(), stderr: newSyncBuffer(),
		client: &http.Client{Transport: &http.Transport{}}}
	cmd.Stdout, cmd.Stderr = d.stdout, d.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		d.client.CloseIdleConnections()
		stdin.Close()
		_ = cmd.Process.Signal(os.Interrupt)
		if err := <-exited; err != nil && ctx.Err() == nil && !killed(err) {
			t.Errorf("demo: %v\nstdout:\n%s\nstderr:\n%s", err, d.stdout, d.stderr)
		}
	})
	return d
}

// killed reports whether the process ended by SIGKILL (the test's).
func killed(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && strings.Contains(ee.Error(), "killed")
}

// wait waits for re in the transcript and returns the match (the live
// view's URL is its first group, for liveViewLine).
func (d *liveDemo) wait(re *regexp.Regexp) string {
	d.t.Helper()
	m, err := d.stdout.waitFor(d.ctx, re)
	if err != nil {
		d.t.Fatalf("waiting for %v: %v\nstdout:\n%s\nstderr:\n%s", re, err, d.stdout, d.stderr)
	}
	if re == liveViewLine {
		d.base = m
	}
	return m
}

// state is the live view's snapshot with session's detail.
func (d *liveDemo) state(session string) inspect.Snapshot {
	d.t.Helper()
	resp, err := d.client.Get(d.base + "api/state?session=" + session)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	var snap inspect.Snapshot
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
		d.t.Fatal(err)
	}
	return snap
}

// TestUI_ApprovalWaitingShownUntilAnswered: with -ui and -approve ask,
// the live view shows run_command waiting for approval in the demo's
// session and in the feed while the terminal asks; once approved at the
// terminal it is gone and the call's result is counted.
func TestUI_ApprovalWaitingShownUntilAnswered(t *testing.T) {
	binaryTest(t)
	d := startLiveDemo(t, "-approve", "ask", "-workspace", t.TempDir(), "-ui", "127.0.0.1:0")
	wait, state, stdin := d.wait, func() inspect.Snapshot { return d.state("demo") }, d.stdin
	wait(liveViewLine)
	asked := wait(askLine) // the terminal asks: the call waits
	id := strings.TrimPrefix(asked, "run_command ")
	snap := state()
	if snap.Session == nil || len(snap.Session.Approvals) != 1 {
		t.Fatalf("session %+v, want one call waiting for approval", snap.Session)
	}
	w := snap.Session.Approvals[0]
	if w.ID != id || w.Tool != "run_command" || !strings.Contains(w.Args, "command") || w.Reason == "" || w.Age == "" {
		t.Fatalf("waiting %+v, want %s of run_command with its arguments and reason", w, id)
	}
	waitingInFeed := false
	for _, it := range snap.Feed {
		waitingInFeed = waitingInFeed || it.Kind == "approval" && strings.Contains(it.Text, id+" on demo") && strings.Contains(it.Text, "waits for approval")
	}
	if !waitingInFeed {
		t.Fatalf("feed %+v, want %s waiting", snap.Feed, id)
	}

	if _, err := io.WriteString(stdin, "y\n"); err != nil {
		t.Fatal(err)
	}
	wait(lingerLine)
	snap = state()
	if len(snap.Session.Approvals) != 0 {
		t.Fatalf("still waiting after the approval: %+v", snap.Session.Approvals)
	}
	approved := false
	for _, it := range snap.Feed {
		approved = approved || it.Kind == "approval" && strings.Contains(it.Text, id) && strings.Contains(it.Text, "was approved")
	}
	ran := false
	for _, tf := range snap.Tools {
		ran = ran || tf.Name == "run_command" && tf.Calls == 1 && tf.Failures == 0
	}
	if !approved || !ran {
		t.Fatalf("feed %+v, tools %+v: want %s approved and run_command's result counted", snap.Feed, snap.Tools, id)
	}
}

// TestUI_ApprovalHeldBeforeRestart: a durable session stopped (killed)
// while its call waited for approval; the demo run again on the same
// store shows the call waiting from the start, and gone once answered.
func TestUI_ApprovalHeldBeforeRestart(t *testing.T) {
	binaryTest(t)
	dir := t.TempDir()
	args := []string{"-approve", "ask", "-store", filepath.Join(dir, "s.db"), "-session", "s1", "-workspace", dir}
	first := startLiveDemo(t, args...)
	asked := first.wait(askLine)
	id := strings.TrimPrefix(asked, "run_command ")
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}

	second := startLiveDemo(t, append(args, "-ui", "127.0.0.1:0")...)
	second.wait(liveViewLine)
	second.wait(askLine) // held again: the terminal asks again
	snap := second.state("s1")
	if snap.Session == nil || len(snap.Session.Approvals) != 1 {
		t.Fatalf("session %+v, want the call held before the restart waiting", snap.Session)
	}
	if w := snap.Session.Approvals[0]; w.ID != id || w.Tool != "run_command" || !w.Restored {
		t.Fatalf("waiting %+v, want %s of run_command, restored from the store", w, id)
	}
	if _, err := io.WriteString(second.stdin, "y\n"); err != nil {
		t.Fatal(err)
	}
	second.wait(lingerLine)
	if snap = second.state("s1"); len(snap.Session.Approvals) != 0 {
		t.Fatalf("still waiting after the approval: %+v", snap.Session.Approvals)
	}
}
