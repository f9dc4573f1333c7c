package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/inspect"
)

var (
	liveViewLine = regexp.MustCompile(`live view at (http://\S+) `)
	askLine      = regexp.MustCompile(`(run_command call_\S+) .*run it\?`)
)

// TestUI_ApprovalWaitingShownUntilAnswered: with -ui and -approve ask,
// the live view shows run_command waiting for approval in the demo's
// session and in the feed while the terminal asks; once approved at the
// terminal it is gone and the call's result is counted.
func TestUI_ApprovalWaitingShownUntilAnswered(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), demoProcessLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, demoBin, "-approve", "ask", "-workspace", t.TempDir(), "-ui", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr := newSyncBuffer(), newSyncBuffer()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		stdin.Close()
		_ = cmd.Process.Signal(os.Interrupt)
		if err := <-exited; err != nil && ctx.Err() == nil {
			t.Errorf("demo: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
		}
	}()
	wait := func(re *regexp.Regexp) string {
		t.Helper()
		m, err := stdout.waitFor(ctx, re)
		if err != nil {
			t.Fatalf("waiting for %v: %v\nstdout:\n%s\nstderr:\n%s", re, err, stdout, stderr)
		}
		return m
	}
	base := wait(liveViewLine)
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	state := func() inspect.Snapshot {
		t.Helper()
		resp, err := client.Get(base + "api/state?session=demo")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var snap inspect.Snapshot
		if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
			t.Fatal(err)
		}
		return snap
	}

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
