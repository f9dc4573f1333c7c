package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
)

// checksumRows are figure 4's checksum rows, each A/B row with its A/A
// row: TestChecksumRowsHaveAA runs them and checks them as the smoke
// checks its rows, so the smoke leaves them out instead of running them
// twice.
const checksumRows = `^4 .*checksums on vs`

// raceSmokeSkip is what the smoke also leaves out under the race
// detector: the rows whose sizes are fixed and large (store compaction and
// checkpoints, 64 PostgreSQL writers), which take most of its time there
// while their code runs under the race detector in the boltstore and
// pgstore tests; and the cluster row, because the pinned protoactor
// cluster races among its own goroutines (cluster/doc.go), which the
// cluster package's tests keep in member processes of their own.
const raceSmokeSkip = checksumRows + `|^4 store: (compaction |longest write wait|most page writes)|^8 store: |^8 sessions/s`

// TestHarnessSmoke runs every figure once with tiny sizes (no peers) and
// checks the shape of the JSON report and of the table, so that the
// harness cannot rot. It asserts nothing about timings.
func TestHarnessSmoke(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	var out, progress bytes.Buffer
	args := []string{"-smoke", "-no-peers", "-json", "-skip", checksumRows}
	if raceDetector {
		args[len(args)-1] = raceSmokeSkip
	}
	if err := run(args, &out, &progress); err != nil {
		t.Fatalf("run: %v\n%s", err, progress.String())
	}
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out.String())
	}
	if rep.Mode != "smoke" || rep.Machine.CPUs == 0 || rep.Machine.Go == "" || rep.Date.IsZero() {
		t.Errorf("report header %+v", rep)
	}
	figures := map[string]int{}
	skipped := regexp.MustCompile(args[len(args)-1])
	for _, r := range rep.Rows {
		figures[r.Figure]++
		if skipped.MatchString(r.Figure + " " + r.Case) {
			t.Errorf("row %s %q ran although -skip leaves it out", r.Figure, r.Case)
		}
		checkRow(t, r)
	}
	for _, id := range []string{"1", "2", "3", "4", "5", "6", "7"} {
		if figures[id] == 0 {
			t.Errorf("figure %s has no rows", id)
		}
	}
	// Figure 7's streaming conversation, played by our loop (its peers'
	// rows need the peers: TestHarnessPeerRows).
	if !slices.ContainsFunc(rep.Rows, func(r Row) bool { return r.Figure == "7" && strings.HasPrefix(r.Case, "(s) streaming:") }) {
		t.Error("figure 7 has no row for the streaming conversation")
	}

	// The table of the same kind of run, filtered to one figure.
	out.Reset()
	if err := run([]string{"-smoke", "-no-peers", "-filter", "^1 "}, &out, &progress); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "figure") || !strings.Contains(lines[0], "ratio") {
		t.Errorf("table:\n%s", out.String())
	}
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l, "1 ") || !strings.Contains(l, "≥ 0.75×") {
			t.Errorf("table line %q", l)
		}
	}
}

// checkRow checks that a row of a smoke run is complete: it ran, it has
// its unit, goal and one round, a ratio when it has a baseline, and a
// verdict exactly when its goal is not "info".
func checkRow(t *testing.T, r Row) {
	t.Helper()
	if r.Error != "" {
		t.Errorf("figure %s %q failed: %s", r.Figure, r.Case, r.Error)
		return
	}
	if r.Case == "" || r.Unit == "" || r.Goal == "" || r.Ours <= 0 || r.Rounds != 1 {
		t.Errorf("row %+v is incomplete", r)
	}
	if r.BaselineName != "" && (r.Baseline <= 0 || (r.Ratio <= 0 && r.Unit != "×")) {
		t.Errorf("row %+v has a baseline but no ratio", r)
	}
	if (r.Met == nil) != (r.Goal == "info") {
		t.Errorf("row %+v: met %v for goal %q", r, r.Met, r.Goal)
	}
}

// TestHarnessPeerRows runs figure 7's peer rows once each with tiny
// sizes: our loop against Eino and the AI SDK, generating and streaming.
// A peer that cannot be prepared here (no Node.js, no network for npm)
// gives a row with the reason instead of a ratio; a peer that runs must
// play its conversation (a run that strays from the script fails it).
func TestHarnessPeerRows(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the Eino peer and may install the AI SDK's packages")
	}
	filter := `^7 \((a|s)\).* vs (eino|ai-sdk)`
	want := []string{"(a) vs eino", "(a) vs ai-sdk", "(a) with async tools vs eino", streamingPeerRow["eino"], streamingPeerRow["ai-sdk"],
		"(a) vs eino, per CPU second", "(a) with async tools vs eino, per CPU second", "(s) streaming vs eino Stream, per CPU second"}
	if raceDetector {
		// The peers are processes of their own, built without the race
		// detector: one row per peer checks the harness's side of them,
		// the plain run checks every row.
		filter = `^7 \(a\) vs (eino|ai-sdk)$`
		want = want[:2]
	}
	var out, progress bytes.Buffer
	if err := run([]string{"-smoke", "-json", "-filter", filter}, &out, &progress); err != nil {
		t.Fatalf("run: %v\n%s", err, progress.String())
	}
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out.String())
	}
	for _, name := range want {
		i := slices.IndexFunc(rep.Rows, func(r Row) bool { return r.Case == name })
		if i < 0 {
			t.Errorf("no row %q", name)
			continue
		}
		r := rep.Rows[i]
		switch {
		case strings.Contains(r.Error, "could not run: could not be prepared"):
			t.Logf("%s: %s", name, r.Error)
		case r.Error != "":
			t.Errorf("%s: %s", name, r.Error)
		case r.Ratio <= 0 || (r.Met == nil) != (r.Goal == "info"):
			t.Errorf("%s: %+v has no ratio against its goal", name, r)
		}
	}
}

// TestFlags checks the flags that take values.
func TestFlags(t *testing.T) {
	var out, errs bytes.Buffer
	if err := run([]string{"-filter", "("}, &out, &errs); err == nil {
		t.Error("a bad -filter was accepted")
	}
	if err := run([]string{"-skip", "("}, &out, &errs); err == nil {
		t.Error("a bad -skip was accepted")
	}
	if err := run([]string{"-smoke", "extra"}, &out, &errs); err == nil {
		t.Error("a stray argument was accepted")
	}
	var j jsonFlag
	if err := j.Set("out.json"); err != nil || !j.set || j.path != "out.json" {
		t.Errorf("-json=out.json: %+v %v", j, err)
	}
}
