package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/inspect"
	"github.com/polyweave/polyweave-go/internal/leakcheck"
)

// syncBuffer is an io.Writer that tests can read while the demo writes.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{}
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{changed: make(chan struct{}, 1)} }

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	n, err := s.b.Write(p)
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
	return n, err
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits until re matches what was written and returns the match's
// first group.
func (s *syncBuffer) waitFor(ctx context.Context, re *regexp.Regexp) (string, error) {
	for {
		if m := re.FindStringSubmatch(s.String()); m != nil {
			return m[1], nil
		}
		select {
		case <-s.changed:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

var lingerLine = regexp.MustCompile(`the live view stays up at (http://\S+):`)

// uiDemo is the demo running in process with -ui, lingering after its
// answer.
type uiDemo struct {
	url    string
	stdout *syncBuffer
	stop   func() error // interrupts it and returns run's error
}

// startUIDemo runs the demo with args plus -ui 127.0.0.1:0 and returns
// once the conversation is over and the live view lingers.
func startUIDemo(t *testing.T, args ...string) *uiDemo {
	t.Helper()
	ctx, interrupt := context.WithCancel(context.Background())
	stdout, stderr := newSyncBuffer(), newSyncBuffer()
	done := make(chan error, 1)
	go func() { done <- run(ctx, append(args, "-ui", "127.0.0.1:0"), stdout, stderr) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() { interrupt(); runErr = <-done })
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	wait, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url, err := stdout.waitFor(wait, lingerLine)
	if err != nil {
		interrupt()
		t.Fatalf("the demo did not linger with its live view: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	return &uiDemo{url: url, stdout: stdout, stop: stop}
}

func TestUI_LingersWithTheLiveViewUntilInterrupted(t *testing.T) {
	defer leakcheck.VerifyNone(t)
	d := startUIDemo(t, "-team", "-crash", "tool")
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(d.url + "api/state?session=demo")
	if err != nil {
		t.Fatal(err)
	}
	var snap inspect.Snapshot
	err = json.NewDecoder(resp.Body).Decode(&snap)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	// The lead is the one agent running under the runtime: the writer
	// and reviewer serve only as its tools, so they start no loop of
	// their own; each delegation ran on a loop under the lead's tool
	// that called it.
	var agents []string
	nodes := map[string]inspect.Node{}
	for _, n := range snap.Tree {
		nodes[n.ID] = n
		if n.Role == "agent" {
			agents = append(agents, n.ID)
		}
	}
	if strings.Join(agents, ",") != "polyweave/lead" {
		t.Fatalf("tree %+v: want the lead alone as a top-level agent, got %v", snap.Tree, agents)
	}
	for _, id := range []string{"polyweave/lead/tool-writer", "polyweave/lead/tool-reviewer"} {
		if n, ok := nodes[id]; !ok || n.Role != "tool" || n.State != "running" || n.Depth != 2 {
			t.Fatalf("tree %+v: want the lead's delegation tool %s running", snap.Tree, id)
		}
	}
	const writerLoop = "polyweave/lead/tool-writer/writer"
	if n, ok := nodes[writerLoop]; !ok || n.Role != "agent loop" || n.Ended == nil || n.Depth != 3 {
		t.Fatalf("tree %+v: want the writer's delegation loop %s kept, ended, under the lead's writer tool", snap.Tree, writerLoop)
	}
	// -crash tool crashed run_command in the writer's delegation, whose
	// loop ran under the lead's writer tool and is over now: the feed
	// keeps the restart, and the tree the crashed actor, ended.
	const crashed = "polyweave/lead/tool-writer/writer/tool-run_command"
	restarted := false
	for _, it := range snap.Feed {
		restarted = restarted || it.Kind == "restart" && it.Actor == crashed
	}
	if !restarted || snap.Restarts != 1 || !snap.Faults {
		t.Fatalf("feed %+v, %d restarts, faults %v: want %s restarted once by -crash tool, fault injection on",
			snap.Feed, snap.Restarts, snap.Faults, crashed)
	}
	shown := false
	for _, n := range snap.Tree {
		shown = shown || n.ID == crashed && n.Restarts == 1 && n.LastFailure != "" && n.Ended != nil
	}
	if !shown {
		t.Fatalf("tree %+v: want %s kept, ended, with its restart and failure", snap.Tree, crashed)
	}
	if snap.Session == nil || !strings.Contains(snap.Session.Answer, "Hello, Ada!") {
		t.Fatalf("the lead's session %+v: want its final answer", snap.Session)
	}
	var sessions []string
	for _, s := range snap.Sessions {
		sessions = append(sessions, s.ID)
	}
	if delegationTag.ReplaceAllString(strings.Join(sessions, ","), "-<tag>-") != "demo,reviewer-<tag>-1,writer-<tag>-1" {
		t.Fatalf("sessions %v", sessions)
	}
	if figures := snap.Tools; len(figures) == 0 {
		t.Fatal("no tool figures")
	}

	if err := d.stop(); err != nil {
		t.Fatalf("interrupted while lingering: %v, want the run's success", err)
	}
	if _, err := client.Get(d.url); err == nil {
		t.Fatal("the live view still answers after the demo stopped")
	}
}

func TestUI_RefusesANonLoopbackAddress(t *testing.T) {
	defer leakcheck.VerifyNone(t)
	_, stderr, err := runInProcess(t, "-ui", "0.0.0.0:0")
	var usage *usageError
	if !errors.As(err, &usage) || !errors.Is(err, inspect.ErrNotLoopback) {
		t.Fatalf("run with -ui 0.0.0.0:0: %v (stderr %s), want a usage error: not a loopback address", err, stderr)
	}
	if exitCode(err, &bytes.Buffer{}) != 2 {
		t.Fatal("want exit status 2")
	}
}
