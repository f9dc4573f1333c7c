package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/openai/openaitest"
)

// The greeting the embedded script's hello.sh prints for Ada.
const wantGreeting = "Hello, Ada! Greetings from a Polyweave workspace.\n"

// runInProcess runs the demo with args and returns its stdout and stderr.
func runInProcess(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err := run(ctx, args, &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

// checkWorkspace checks the files the embedded script leaves behind.
func checkWorkspace(t *testing.T, dir string) {
	t.Helper()
	for name, want := range map[string]string{
		"greeting.txt": wantGreeting,
		"hello.sh":     "echo \"Hello, $name! Greetings from a Polyweave workspace.\"\n",
	} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("the agent did not leave %s: %v", name, err)
			continue
		}
		if !strings.HasSuffix(string(got), want) {
			t.Errorf("%s = %q, want it to end with %q", name, got, want)
		}
	}
}

// checkTranscript checks that out tells the whole default run.
func checkTranscript(t *testing.T, out string) {
	t.Helper()
	for _, want := range []string{
		"call       write_file call_write",
		"result     write_file call_write ok",
		"call       run_command call_run",
		`"stdout":"Hello, Ada! Greetings from a Polyweave workspace.\n"`,
		"result     read_file call_read ok",
		"result     read_file call_list ok",
		"model      Done. hello.sh prints a greeting",
		"summary    ok · ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the transcript lacks %q:\n%s", want, out)
		}
	}
}

func TestRun_DefaultScript(t *testing.T) {
	defer leakcheck.VerifyNone(t)
	dir := t.TempDir()
	out, errOut, err := runInProcess(t, "-workspace", dir)
	if err != nil {
		t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	checkTranscript(t, out)
	if !strings.Contains(out, "summary    ok · 4 iterations · 4 tool calls (0 failed) · 0 restarts") {
		t.Errorf("unexpected summary:\n%s", out)
	}
	checkWorkspace(t, dir)
}

func TestRun_CrashHeals(t *testing.T) {
	for _, tc := range []struct {
		flag    string
		want    []string
		summary string
	}{
		{"tool", []string{
			"fault      panicking in the run_command handler (tool call 2)",
			"supervisor restarted polyweave/agent/tool-run_command (failure 1)",
			"result     run_command call_run FAILED (panic)",
			"result     run_command call_run_retry ok",
		}, "ok · 5 iterations · 5 tool calls (1 failed) · 1 restart"},
		{"loop", []string{
			"fault      panicking in the tool loop reporting run_command's result (tool result 2)",
			"supervisor restarted polyweave/agent (failure 1)",
			"resume     the answer failed: sending the conversation so far (5 messages) again on stream demo#2\n",
		}, "ok · 4 iterations · 4 tool calls (0 failed) · 1 restart"},
		{"model", []string{
			"fault      panicking in the model adapter emitting TOOL_CALL (model frame 14)",
			"supervisor restarted polyweave/agent/model (failure 1)",
			"resume     the answer failed: sending the conversation so far (3 messages) again on stream demo#2 (the unfinished answer above is dropped: the model answers again)",
		}, "ok · 4 iterations · 4 tool calls (0 failed) · 1 restart"},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			defer leakcheck.VerifyNone(t)
			dir := t.TempDir()
			out, errOut, err := runInProcess(t, "-workspace", dir, "-crash", tc.flag)
			if err != nil {
				t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
			}
			checkTranscript(t, out)
			for _, want := range append(tc.want, tc.summary) {
				if !strings.Contains(out, want) {
					t.Errorf("the transcript lacks %q:\n%s", want, out)
				}
			}
			checkWorkspace(t, dir)
		})
	}
}

// TestRun_CrashPointNeverReached: a model frame past the last one (which
// the flags cannot know in advance) is reported as never reached.
// With a real model the number of frames is not known up front: a crash
// point beyond them is reported at the end.
func TestRun_CrashPointNeverReached(t *testing.T) {
	defer leakcheck.VerifyNone(t)
	srv := openaitest.NewServer(scriptTurns(t))
	defer srv.Close()
	out, _, err := runInProcess(t, "-crash", "model:999", "-base-url", srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "the -crash point model:999 was never reached") || strings.Contains(out, "fault ") {
		t.Errorf("want a note that nothing was injected:\n%s", out)
	}
}

func TestRun_MaxIterationsReached(t *testing.T) {
	defer leakcheck.VerifyNone(t)
	out, _, err := runInProcess(t, "-max-iterations", "2")
	if err == nil || !strings.Contains(err.Error(), "no final answer") {
		t.Fatalf("err = %v, want no final answer", err)
	}
	for _, want := range []string{"FAILED (iteration_limit)", "summary    failed · "} {
		if !strings.Contains(out, want) {
			t.Errorf("the transcript lacks %q:\n%s", want, out)
		}
	}
}

func TestRun_JSONLines(t *testing.T) {
	defer leakcheck.VerifyNone(t)
	out, errOut, err := runInProcess(t, "-json")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var types []messages.FrameType
	for i, line := range lines {
		var f messages.Frame
		if err := protojson.Unmarshal([]byte(line), &f); err != nil {
			t.Fatalf("line %d is not a frame in JSON: %v\n%s", i+1, err, line)
		}
		if f.GetStreamId() != "demo" {
			t.Errorf("line %d: stream %q, want demo", i+1, f.GetStreamId())
		}
		types = append(types, f.GetType())
	}
	count := map[messages.FrameType]int{}
	for _, ty := range types {
		count[ty]++
	}
	if count[messages.FrameType_TOOL_CALL] != 4 || count[messages.FrameType_TOOL_RESULT] != 4 || count[messages.FrameType_END] != 1 {
		t.Errorf("frame counts %v, want 4 calls, 4 results, 1 END", count)
	}
	if types[len(types)-1] != messages.FrameType_END {
		t.Errorf("last frame is %v, want END", types[len(types)-1])
	}
	if !strings.Contains(errOut, "summary    ok · ") {
		t.Errorf("the summary is not on stderr:\n%s", errOut)
	}
}

func TestRun_Flags(t *testing.T) {
	_, errOut, err := runInProcess(t, "-h")
	if !errors.Is(err, flag.ErrHelp) || exitCode(err, &bytes.Buffer{}) != 0 {
		t.Fatalf("-h: err = %v, want flag.ErrHelp and exit 0", err)
	}
	for _, name := range []string{"-base-url", "-model", "-api-key-env", "-prompt", "-workspace",
		"-max-iterations", "-timeout", "-store", "-session", "-crash", "-json", "-team"} {
		if !strings.Contains(errOut, "  "+name+" ") && !strings.Contains(errOut, "  "+name+"\n") {
			t.Errorf("-h does not explain %s:\n%s", name, errOut)
		}
	}

	for args, want := range map[string]string{
		"-nope":             "flag provided but not defined: -nope",
		"-crash bogus":      `unknown crash site "bogus"`,
		"-crash tool:0":     "N must be a whole number from 1",
		"-max-iterations 0": "-max-iterations must be at least 1",
		"-timeout 0s":       "-timeout must be positive",
		"-session s1":       "-session needs -store",
		"-prompt=":          "-prompt is empty",
		"extra":             `unexpected argument "extra"`,
		"-api-key-env=":     "-api-key-env is empty",
	} {
		_, errOut, err := runInProcess(t, strings.Fields(args)...)
		var usage *usageError
		if !errors.As(err, &usage) {
			t.Errorf("%s: err = %v, want a usage error", args, err)
			continue
		}
		var printed bytes.Buffer
		if code := exitCode(err, &printed); code != 2 {
			t.Errorf("%s: exit code %d, want 2", args, code)
		}
		if msg := errOut + printed.String(); !strings.Contains(msg, want) {
			t.Errorf("%s: message %q lacks %q", args, msg, want)
		}
	}
}

func TestRun_MissingWorkspace(t *testing.T) {
	defer leakcheck.VerifyNone(t)
	_, _, err := runInProcess(t, "-workspace", filepath.Join(t.TempDir(), "missing"))
	if err == nil || !strings.Contains(err.Error(), "workspace") {
		t.Fatalf("err = %v, want an error naming the workspace", err)
	}
	var printed bytes.Buffer
	if exitCode(err, &printed) != 2 || !strings.HasPrefix(printed.String(), "demo: ") {
		t.Errorf("exit code / message: %q, want exit code 2, as for any bad flag", printed.String())
	}
}

func TestRun_CrashThatNeverFires(t *testing.T) {
	_, _, err := runInProcess(t, "-crash", "tool:99")
	var printed bytes.Buffer
	if exitCode(err, &printed) != 2 || !strings.Contains(printed.String(), "would never fire") {
		t.Errorf("-crash tool:99: exit code / message %q", printed.String())
	}
	// With -team the crash strikes in the writer, which makes 2 calls.
	_, _, err = runInProcess(t, "-team", "-crash", "tool:3")
	printed.Reset()
	if exitCode(err, &printed) != 2 || !strings.Contains(printed.String(), "the scripted writer makes 2 tool calls") {
		t.Errorf("-team -crash tool:3: exit code / message %q", printed.String())
	}
}

func TestWithRetryTurn(t *testing.T) {
	script, err := loadScript(defaultScript)
	if err != nil {
		t.Fatal(err)
	}
	got := withRetryTurn(script, crashPoint{site: crashTool, n: 3})
	if len(got.Turns) != len(script.Turns)+1 {
		t.Fatalf("%d turns, want %d", len(got.Turns), len(script.Turns)+1)
	}
	retry := got.Turns[3]
	if len(retry.ToolCalls) != 1 || retry.ToolCalls[0].ID != "call_read_retry" || retry.ToolCalls[0].Arguments != script.Turns[2].ToolCalls[0].Arguments {
		t.Errorf("retry turn = %+v, want call_read again", retry)
	}
	if got.Turns[4].Text != script.Turns[3].Text {
		t.Errorf("the last turn moved to %q", got.Turns[4].Text)
	}
	if len(script.Turns) != 4 || script.Turns[2].ToolCalls[0].ID != "call_read" {
		t.Errorf("the original script changed")
	}
	if n := len(withRetryTurn(script, crashPoint{site: crashModel, n: 3}).Turns); n != len(script.Turns) {
		t.Errorf("a model crash changed the script to %d turns", n)
	}
}

func TestRun_SessionReplaysOnceEnded(t *testing.T) {
	defer leakcheck.VerifyNone(t)
	dir := t.TempDir()
	store := filepath.Join(dir, "demo.db")
	out, errOut, err := runInProcess(t, "-store", store, "-session", "s1")
	if err != nil {
		t.Fatalf("first run: %v\n%s\n%s", err, out, errOut)
	}
	checkTranscript(t, out)
	checkWorkspace(t, filepath.Join(store+".files", "s1"))
	for _, want := range []string{"session    new session s1 in " + store, "session    to resume or replay it: go run ./cmd/demo -store " + store + " -session s1"} {
		if !strings.Contains(out, want) {
			t.Errorf("the first run lacks %q:\n%s", want, out)
		}
	}

	out, errOut, err = runInProcess(t, "-store", store, "-session", "s1")
	if err != nil {
		t.Fatalf("second run: %v\n%s\n%s", err, out, errOut)
	}
	for _, want := range []string{
		"resuming session s1 from " + store + " after 3 tool rounds; it has ended: its final answer comes from the store",
		"user       " + defaultPrompt,
		"model      Done. hello.sh prints a greeting",
		// The replayed answer holds the whole stored conversation, so the
		// summary counts what the first run did.
		"summary    ok · 4 iterations · 4 tool calls (0 failed)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the second run lacks %q:\n%s", want, out)
		}
	}

	_, _, err = runInProcess(t, "-store", store, "-session", "s1", "-prompt", "something else")
	if err == nil || !strings.Contains(err.Error(), `session "s1" was started with another prompt`) || exitCode(err, &bytes.Buffer{}) != 2 {
		t.Errorf("another prompt: err = %v, want a usage error (exit 2)", err)
	}
}

func TestRun_CrashHealsFromTheStore(t *testing.T) {
	for _, tc := range []struct{ site, resumed string }{
		{"loop", "session    resumed after 2 tool rounds"},
		{"model", "session    resumed after 1 tool round"},
	} {
		t.Run(tc.site, func(t *testing.T) {
			defer leakcheck.VerifyNone(t)
			dir := t.TempDir()
			out, errOut, err := runInProcess(t, "-store", filepath.Join(dir, "demo.db"), "-workspace", dir, "-crash", tc.site)
			if err != nil {
				t.Fatalf("run: %v\n%s\n%s", err, out, errOut)
			}
			checkTranscript(t, out)
			for _, want := range []string{"resume     the answer failed: resuming the session from the store on stream s-", tc.resumed,
				"summary    ok · 4 iterations · 4 tool calls (0 failed) · 1 restart"} {
				if !strings.Contains(out, want) {
					t.Errorf("the transcript lacks %q:\n%s", want, out)
				}
			}
			if n := strings.Count(out, "call       write_file"); n != 1 {
				t.Errorf("write_file was called %d times, want once:\n%s", n, out)
			}
			checkWorkspace(t, dir)
		})
	}
}

func TestTranscript_SideNotesWaitForTheirConsequence(t *testing.T) {
	var out bytes.Buffer
	tr := newTranscript(&out, nil, time.Now())
	tr.Frame(messages.ToolCall("s", "c1", "run_command", json.RawMessage(`{"command":"a && b"}`)))
	tr.Fault("panicking in the handler")
	tr.Frame(messages.Text("s", "Still "))
	tr.Frame(messages.Text("s", "talking"))
	failed := messages.ToolError("s", "c1", "run_command", "boom")
	failed.Meta.FailureKind = "panic"
	tr.Frame(failed)
	tr.Frame(messages.End("s"))

	var labels []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		fields := strings.Fields(line)
		labels = append(labels, fields[1])
	}
	if got, want := strings.Join(labels, " "), "call model fault result"; got != want {
		t.Errorf("line labels %q, want %q:\n%s", got, want, &out)
	}
	for _, want := range []string{
		`call       run_command c1 {"command":"a && b"}`,
		"model      Still talking\n",
		`result     run_command c1 FAILED (panic) in `,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the transcript lacks %q:\n%s", want, &out)
		}
	}
}

func TestClip(t *testing.T) {
	long := strings.Repeat("é", maxShown+5)
	if got := clip(long); got != strings.Repeat("é", maxShown)+"… (5 more characters)" {
		t.Errorf("clip = %q", got)
	}
	if got := shown([]byte(`{ "a" : "<b>" }`)); got != `{"a":"<b>"}` {
		t.Errorf("shown = %q", got)
	}
}

// checkTeamTranscript checks that out tells the whole -team run, in
// order: each sub-agent's lines come between the lead's call that
// started it and that call's result, indented.
func checkTeamTranscript(t *testing.T, out string) {
	t.Helper()
	at := 0
	for _, want := range []string{
		"lead       I'll have the writer make the script",
		"call       writer call_writer {\"task\":",
		"  writer     I'll start by writing",
		"  call       write_file call_write ",
		"  result     write_file call_write ok",
		"  result     run_command call_run",
		"  writer     Wrote hello.sh and ran it for Ada",
		"result     writer call_writer ok",
		"call       reviewer call_reviewer ",
		"  call       read_file call_read_script ",
		"  result     read_file call_read_greeting ok",
		"  reviewer   hello.sh greets its first argument",
		"result     reviewer call_reviewer ok",
		"lead       Done. The writer wrote hello.sh",
	} {
		i := strings.Index(out[at:], want)
		if i < 0 {
			t.Errorf("the transcript lacks %q after byte %d:\n%s", want, at, out)
			return
		}
		at += i + len(want)
	}
}

// delegationTag matches the random tag of a delegation's session id
// ("writer-K3MZQ7PXA2-1"), which tests replace with "-<tag>-".
var delegationTag = regexp.MustCompile(`-[A-Z2-7]{10}-`)

func TestRun_Team(t *testing.T) {
	for _, tc := range []struct {
		crash string
		want  []string
	}{
		{"", []string{"summary    ok · 8 iterations · 6 tool calls (0 failed) · 0 restarts"}},
		// The fault and the supervisor's decision are the writer's: they
		// are indented under the delegation, as its other lines are.
		{"tool", []string{
			"s   fault      panicking in the run_command handler (tool call 2)\n",
			"s   supervisor restarted polyweave/lead/tool-writer/writer/tool-run_command (failure 1)",
			"  result     run_command call_run FAILED (panic)",
			"  result     run_command call_run_retry ok",
			"summary    ok · 9 iterations · 7 tool calls (1 failed) · 1 restart",
		}},
		{"loop", []string{
			"s   fault      panicking in ",
			"s   supervisor restarted polyweave/lead/tool-writer/writer (failure 1)",
			"  resume     the answer failed: sending the conversation so far (5 messages) again on stream writer-<tag>-1#2\n",
			"summary    ok · 8 iterations · 6 tool calls (0 failed) · 1 restart",
		}},
		{"model", []string{
			"s   fault      panicking in ",
			"s   supervisor restarted polyweave/lead/tool-writer/writer/model (failure 1)",
			"  resume     the answer failed: sending the conversation so far (3 messages) again on stream writer-<tag>-1#2 (the unfinished answer above is dropped",
			"summary    ok · 8 iterations · 6 tool calls (0 failed) · 1 restart",
		}},
	} {
		t.Run("crash="+tc.crash, func(t *testing.T) {
			defer leakcheck.VerifyNone(t)
			dir := t.TempDir()
			args := []string{"-team", "-workspace", dir}
			if tc.crash != "" {
				args = append(args, "-crash", tc.crash)
			}
			out, errOut, err := runInProcess(t, args...)
			if err != nil {
				t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
			}
			checkTeamTranscript(t, out)
			// A delegation's session id has its agent's random tag.
			tagged := delegationTag.ReplaceAllString(out, "-<tag>-")
			for _, want := range tc.want {
				if !strings.Contains(tagged, want) {
					t.Errorf("the transcript lacks %q:\n%s", want, out)
				}
			}
			checkWorkspace(t, dir)
		})
	}
}

// A session id names a folder under <store>.files/: one that would put the
// workspace elsewhere (.., ../x, a/b) or share the store's folder (.) is a
// usage error, and nothing is made.
func TestRun_SessionIDMustNameOneFolder(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "st", "demo.db")
	if err := os.Mkdir(filepath.Dir(store), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"..", ".", "../escape", "a/b", "/abs", ".hidden", "a\\b", strings.Repeat("x", 129)} {
		_, _, err := runInProcess(t, "-store", store, "-session", id)
		var usage *usageError
		var printed bytes.Buffer
		if !errors.As(err, &usage) || exitCode(err, &printed) != 2 || !strings.Contains(printed.String(), "<store>.files/ID") {
			t.Errorf("-session %q: err = %v (%q), want a usage error", id, err, printed.String())
		}
	}
	for _, leftover := range []string{filepath.Join(dir, "st", "escape"), store, store + ".files"} {
		if _, err := os.Stat(leftover); !os.IsNotExist(err) {
			t.Errorf("%s was made: %v", leftover, err)
		}
	}
	if !validSessionID("s-20261205-041500-a1b2c3") || !validSessionID("k") || !validSessionID("run_1.2") {
		t.Error("an ordinary session id is refused")
	}
}

// The resume hint names every flag the session needs, quoted for the
// shell: the workspace it works in (here a folder with a blank and a
// quote) as well as the store and the id.
func TestRun_ResumeHintHasTheWorkspace(t *testing.T) {
	defer leakcheck.VerifyNone(t)
	dir := filepath.Join(t.TempDir(), "Ada's work")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(t.TempDir(), "demo.db")
	out, errOut, err := runInProcess(t, "-store", store, "-session", "s1", "-workspace", dir)
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, out, errOut)
	}
	want := "to resume or replay it: go run ./cmd/demo -store " + store + " -session s1 -workspace '" +
		strings.ReplaceAll(dir, "'", `'\''`) + "'\n"
	if !strings.Contains(out, want) {
		t.Errorf("the hint is not %q:\n%s", want, out)
	}
}

func TestResumeHint(t *testing.T) {
	s := &session{id: "s1", path: "/tmp/a b.db"}
	cfg := config{workspace: "/w", team: true, baseURL: "http://h/v1", model: "m 1", modelSet: true,
		mcp: mcpServers{{raw: "fs=npx -y server"}}, maxIterations: 2}
	want := `go run ./cmd/demo -store '/tmp/a b.db' -session s1 -workspace /w -team -base-url http://h/v1 -model 'm 1' -mcp 'fs=npx -y server' -max-iterations 2`
	if got := s.resumeHint(cfg); got != want {
		t.Errorf("hint\n%s\nwant\n%s", got, want)
	}
	// The defaults are left out.
	cfg = config{maxIterations: defaultMaxIterations, approval: approvalFlags{mode: approveAll}, timeout: defaultTimeout}
	if got, want := s.resumeHint(cfg), `go run ./cmd/demo -store '/tmp/a b.db' -session s1`; got != want {
		t.Errorf("hint with the defaults\n%s\nwant\n%s", got, want)
	}
	for in, want := range map[string]string{"": "''", "plain-1.db": "plain-1.db", "it's": `'it'\''s'`, "$HOME": `'$HOME'`} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

// A store that holds nothing of the session gives no resume hint.
func TestSession_PersistedOnlyOnceStored(t *testing.T) {
	ctx := context.Background()
	cfg := config{store: filepath.Join(t.TempDir(), "demo.db"), session: "k", prompt: "hi"}
	s, err := openSession(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if ok, err := s.persisted(ctx); ok || err != nil {
		t.Errorf("a new session is persisted: %v, %v", ok, err)
	}
}

// The retry line names the stream the agent really uses.
func TestResumeLineNamesTheStream(t *testing.T) {
	d := &driver{}
	ev := agent.Event{Attempt: 2, Answer: &models.Answer{}}
	for _, id := range []string{"demo", "a#b"} {
		line := d.resumeLine(ev, id, 1, false, true)
		if want := "on stream " + agent.StreamID(id, 2); !strings.HasSuffix(line, want) {
			t.Errorf("%s: %q, want it to end %q", id, line, want)
		}
	}
}

// A system folder as -workspace is a usage error that says what to do
// with the demo's flags, not which library option to set.
func TestRun_SystemWorkspace(t *testing.T) {
	defer leakcheck.VerifyNone(t)
	_, _, err := runInProcess(t, "-workspace", "/usr")
	var printed bytes.Buffer
	if exitCode(err, &printed) != 2 || !strings.Contains(printed.String(), "-workspace /usr is a system directory: make a folder inside it") ||
		strings.Contains(printed.String(), "Options.") {
		t.Errorf("-workspace /usr: %q, want exit 2 and advice in terms of flags", printed.String())
	}
}

// A -timeout that passes while the run is set up (before the session is
// read from -store, or while an -mcp server is started) fails the run as
// one that passes later does: exit status 1 and "no final answer within
// -timeout", not the deadline error of whatever was being set up.
func TestRun_TimeoutDuringSetup(t *testing.T) {
	defer leakcheck.VerifyNone(t)
	for name, args := range map[string][]string{
		"-store": {"-store", filepath.Join(t.TempDir(), "demo.db")},
		"-mcp":   {"-workspace", t.TempDir(), "-mcp", "sleep 100"},
	} {
		_, _, err := runInProcess(t, append(args, "-timeout", "1ns")...)
		var printed bytes.Buffer
		if exitCode(err, &printed) != 1 || !strings.HasPrefix(printed.String(), "demo: no final answer within -timeout 1ns") {
			t.Errorf("-timeout 1ns with %s: %q, want exit 1 and the run's timeout failure", name, printed.String())
		}
	}
}

// A team's session is the lead agent's: a second run finds it in the
// store (and says so), and the hint to resume it includes -team.
func TestRun_TeamSessionIsFoundAgain(t *testing.T) {
	defer leakcheck.VerifyNone(t)
	store := filepath.Join(t.TempDir(), "demo.db")
	args := []string{"-team", "-store", store, "-session", "t1"}
	if out, errOut, err := runInProcess(t, args...); err != nil {
		t.Fatalf("first run: %v\n%s\n%s", err, out, errOut)
	}
	out, errOut, err := runInProcess(t, args...)
	if err != nil {
		t.Fatalf("second run: %v\n%s\n%s", err, out, errOut)
	}
	for _, want := range []string{"resuming session t1 from " + store, "-session t1 -team\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the second run lacks %q:\n%s", want, out)
		}
	}
}

// A call cut by -timeout gets a result line, the cancelled result a
// durable session keeps for it; an answered call gets none more.
func TestTranscript_CutCallsAreShownCancelled(t *testing.T) {
	var out bytes.Buffer
	tr := newTranscript(&out, nil, time.Now())
	tr.Frame(messages.ToolCall("demo", "call_write", "write_file", []byte(`{"path":"a"}`)))
	tr.Frame(messages.ToolCall("demo", "call_read", "read_file", []byte(`{"path":"b"}`)))
	res, err := messages.ToolResult("demo", "call_read", "read_file", map[string]bool{"success": true})
	if err != nil {
		t.Fatal(err)
	}
	tr.Frame(res)
	tr.CutCalls("cut by -timeout 1s")
	got := out.String()
	if !strings.Contains(got, "result     write_file call_write FAILED (cancelled) after ") || !strings.Contains(got, ": cut by -timeout 1s\n") {
		t.Errorf("no cancelled result for the cut call:\n%s", got)
	}
	if n := strings.Count(got, "call_read"); n != 2 {
		t.Errorf("the answered call shows %d times, want its call and result:\n%s", n, got)
	}
}

// -crash model:N beyond the frames the scripted model emits is refused up
// front, like tool:N beyond its calls; the last frame is still a valid
// crash point (the panic fires there).
func TestRun_CrashModelBound(t *testing.T) {
	for _, tc := range []struct {
		team   bool
		frames int
	}{{false, scriptedModelFrames}, {true, scriptedWriterFrames}} {
		var args []string
		if tc.team {
			args = append(args, "-team")
		}
		over := fmt.Sprintf("model:%d", tc.frames+1)
		_, _, err := runInProcess(t, append(args, "-crash", over)...)
		var printed bytes.Buffer
		if exitCode(err, &printed) != 2 || !strings.Contains(printed.String(), "would never fire") {
			t.Errorf("team %v, -crash %s: %q, want a usage error", tc.team, over, printed.String())
		}
		last := fmt.Sprintf("model:%d", tc.frames)
		out, errOut, err := runInProcess(t, append(args, "-crash", last)...)
		if err != nil || strings.Contains(out, "was never reached") || !strings.Contains(out, "fault      panicking in the model adapter") {
			t.Errorf("team %v, -crash %s did not fire: %v\n%s\n%s", tc.team, last, err, out, errOut)
		}
	}
}

// A session started with -team is the lead's, one without it the
// agent's: resuming it with the other form is refused (exit 2) with the
// flag to add or drop, instead of starting a new session that reruns
// everything in the same folder.
func TestRun_SessionResumedInTheOtherForm(t *testing.T) {
	defer leakcheck.VerifyNone(t)
	store := filepath.Join(t.TempDir(), "demo.db")
	for _, tc := range []struct {
		started, resumed []string
		want             string
	}{
		{[]string{"-team"}, nil, `session "t1" was started with -team; add -team to resume it`},
		{nil, []string{"-team"}, `session "s1" was started without -team; drop -team to resume it`},
	} {
		id := "s1"
		if len(tc.started) > 0 {
			id = "t1"
		}
		args := []string{"-store", store, "-session", id}
		if out, errOut, err := runInProcess(t, append(args, tc.started...)...); err != nil {
			t.Fatalf("first run: %v\n%s\n%s", err, out, errOut)
		}
		out, _, err := runInProcess(t, append(args, tc.resumed...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || exitCode(err, &bytes.Buffer{}) != 2 {
			t.Errorf("resumed with %q: err = %v, want a usage error %q (exit 2)", tc.resumed, err, tc.want)
		}
		if strings.Contains(out, "new session") {
			t.Errorf("resumed with %q: a new session started:\n%s", tc.resumed, out)
		}
	}
}

// A run's failure is put down to -timeout or the interrupt only when it
// is the context's ending: an agent that failed for a reason of its own
// just before the context ended is reported with that reason.
func TestDriverFailure_LabelsOnlyWhatTheContextEnded(t *testing.T) {
	timedOutCtx := func() context.Context {
		ctx, cancel := context.WithTimeoutCause(context.Background(), time.Nanosecond, errTimeout)
		t.Cleanup(cancel)
		<-ctx.Done()
		return ctx
	}
	interruptedCtx := func() context.Context {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(errors.New("interrupt signal received"))
		ctx, stop := context.WithTimeoutCause(ctx, time.Hour, errTimeout)
		t.Cleanup(stop)
		return ctx
	}
	failed := &agent.FailedError{Session: "s1", Attempts: 3, Reason: "the model answered 500"}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  func(ctx context.Context) error
		want string
	}{
		{"timeout", timedOutCtx(), context.Cause, "no final answer within -timeout 1m0s"},
		{"failed, then timeout", timedOutCtx(), func(context.Context) error { return failed }, "the agent failed: the model answered 500"},
		{"interrupt", interruptedCtx(), context.Cause, "interrupted"},
		{"failed, then interrupt", interruptedCtx(), func(context.Context) error { return failed }, "the agent failed: the model answered 500"},
		{"failed", context.Background(), func(context.Context) error { return failed }, "the agent failed: the model answered 500"},
		{"loop kept restarting", context.Background(), func(context.Context) error {
			return &agent.FailedError{Session: "s1", Attempts: 1, Uncounted: 10, Reason: "restarted", Err: agent.ErrLoopRestarting}
		}, "the agent failed: the tool loop kept restarting for other actors' failures (10 attempts not counted; the last: restarted)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			d := &driver{cfg: config{timeout: time.Minute}, tr: newTranscript(&out, nil, time.Now())}
			if got := d.failure(tc.ctx, tc.err(tc.ctx)); got == nil || got.Error() != tc.want {
				t.Errorf("failure: %v, want %q", got, tc.want)
			}
		})
	}
}

// A journal records one agent's writes: the team's agents would share
// the run's -undo, and undoing the session of one would undo another's
// writes, so -team refuses -undo (and -approve) before anything starts.
func TestParseFlags_TeamRefusesUndo(t *testing.T) {
	for _, args := range [][]string{{"-team", "-undo"}, {"-team", "-approve", "deny"}} {
		_, err := parseFlags(args, io.Discard)
		var usage *usageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), "not with -team") {
			t.Errorf("%v: err = %v, want a usage error refusing -team", args, err)
		}
		if code := exitCode(err, io.Discard); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
