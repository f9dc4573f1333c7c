package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
)

// span is what the tests read of a line of -trace's file.
type span struct {
	Name        string
	SpanContext struct{ TraceID, SpanID string }
	Parent      struct{ SpanID string }
	Attributes  []struct {
		Key   string
		Value struct{ Value any }
	}
	Events []struct{ Name string }
}

func readSpans(t *testing.T, file string) []span {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []span
	dec := json.NewDecoder(bufio.NewReader(f))
	for dec.More() {
		var s span
		if err := dec.Decode(&s); err != nil {
			t.Fatalf("-trace file: %v", err)
		}
		out = append(out, s)
	}
	return out
}

// TestTrace_CrashedRunIsOneTree: -trace writes the run as one tree: the
// run at the root, a chat span per model request and an execute_tool span
// per call under it, the injected crash's restart as an event of the run.
func TestTrace_CrashedRunIsOneTree(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	file := filepath.Join(t.TempDir(), "trace.jsonl")
	if _, stderr, err := runInProcess(t, "-trace", file, "-crash", "tool"); err != nil {
		t.Fatalf("demo: %v\n%s", err, stderr)
	}
	spans := readSpans(t, file)
	var root span
	count := map[string]int{}
	for _, s := range spans {
		count[s.Name]++
		if s.Name == "invoke_agent agent" {
			root = s
		}
	}
	if count["invoke_agent agent"] != 1 || count["chat"] != 5 || count["execute_tool run_command"] != 2 || count["execute_tool write_file"] != 1 || count["execute_tool read_file"] != 2 {
		t.Fatalf("spans %v", count)
	}
	for _, s := range spans {
		if s.SpanContext.TraceID != root.SpanContext.TraceID || (s.Name != root.Name && s.Parent.SpanID != root.SpanContext.SpanID) {
			t.Errorf("span %s is not in the run's tree", s.Name)
		}
	}
	restarted := false
	for _, ev := range root.Events {
		restarted = restarted || ev.Name == "supervision"
	}
	if !restarted {
		t.Errorf("the run span has no supervision event: %+v", root.Events)
	}
}

// TestTrace_TeamIsOneTrace: with -team, each sub-agent's run is a child
// of the lead's tool call that delegated to it.
func TestTrace_TeamIsOneTrace(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	file := filepath.Join(t.TempDir(), "trace.jsonl")
	if _, stderr, err := runInProcess(t, "-team", "-trace", file); err != nil {
		t.Fatalf("demo: %v\n%s", err, stderr)
	}
	spans := readSpans(t, file)
	byID := map[string]span{}
	for _, s := range spans {
		byID[s.SpanContext.SpanID] = s
	}
	for _, sub := range []string{"writer", "reviewer"} {
		found := false
		for _, s := range spans {
			if s.Name != "invoke_agent "+sub {
				continue
			}
			found = true
			call := byID[s.Parent.SpanID]
			lead := byID[call.Parent.SpanID]
			if call.Name != "execute_tool "+sub || lead.Name != "invoke_agent lead" || s.SpanContext.TraceID != lead.SpanContext.TraceID {
				t.Errorf("%s's run is under %q under %q", sub, call.Name, lead.Name)
			}
		}
		if !found {
			t.Errorf("no run span of %s", sub)
		}
	}
}
