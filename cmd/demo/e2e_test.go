//go:build !race

// The tests that run the demo binary are left out under the race
// detector: the binary is built without it, so they would repeat the
// plain run (CI runs both). The in-process tests run under it.

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/models/anthropic/anthropictest"
	"github.com/polyweave/polyweave-go/models/modeltest"
	"github.com/polyweave/polyweave-go/models/openai/openaitest"
	"github.com/polyweave/polyweave-go/models/scripted"
)

// demoBin is the demo, built once (by TestMain) for the tests that run
// it.
var demoBin string

// buildDemo names the package TestMain builds for the tests that run the
// demo binary, and sets demoBin to where the binary will be in dir.
func buildDemo(dir string) string {
	demoBin = filepath.Join(dir, "demo")
	return "."
}

// binaryTest marks t as a test that runs the demo binary: it runs in
// parallel with the other such tests (each run is a process of its own,
// which mostly waits for a member, a model server or a timeout), once
// TestMain's build of the binary has ended.
func binaryTest(t *testing.T) {
	t.Parallel()
	waitBuilt(t)
}

// processResult is what one run of the demo binary did.
type processResult struct {
	stdout, stderr string
	code           int
}

// demoProcessLimit bounds every run of the binary: a run that hangs fails
// the test instead of the test hanging.
const demoProcessLimit = time.Minute

// runDemo runs the binary with args, in an environment with TMPDIR set to
// a fresh folder (returned) and env added.
func runDemo(t *testing.T, env []string, args ...string) (processResult, string) {
	t.Helper()
	return runDemoStdin(t, env, nil, args...)
}

// runDemoStdin is runDemo with stdin as the binary's input (nil: none).
func runDemoStdin(t *testing.T, env []string, stdin io.Reader, args ...string) (processResult, string) {
	t.Helper()
	tmp := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), demoProcessLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, demoBin, args...)
	cmd.Env = append(append(os.Environ(), "TMPDIR="+tmp), env...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("demo %v did not exit within %v\nstdout:\n%s\nstderr:\n%s", args, demoProcessLimit, &stdout, &stderr)
	}
	res := processResult{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		res.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("run demo: %v", err)
	}
	return res, tmp
}

// runDemoUntilKilled runs the binary with args until its stdout has
// until, kills it there (SIGKILL) and returns what it printed.
func runDemoUntilKilled(t *testing.T, until string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), demoProcessLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, demoBin, args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var seen bytes.Buffer
	buf := make([]byte, 4096)
	for !strings.Contains(seen.String(), until) {
		n, err := stdout.Read(buf)
		seen.Write(buf[:n])
		if err != nil {
			t.Fatalf("the demo stopped before %q: %v\n%s", until, err, &seen)
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	return seen.String()
}

func (r processResult) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

func TestE2E_NoFlags(t *testing.T) {
	binaryTest(t)
	res, tmp := runDemo(t, nil)
	if res.code != 0 {
		t.Fatalf("want exit 0: %v", res)
	}
	checkTranscript(t, res.stdout)
	// The temporary workspace was made under TMPDIR and removed at exit.
	if !strings.Contains(res.stdout, "workspace "+tmp+"/polyweave-demo-") {
		t.Errorf("the workspace is not a fresh folder under TMPDIR:\n%s", res.stdout)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("the temporary workspace was left behind: %v", left)
	}
}

func TestE2E_Workspace(t *testing.T) {
	binaryTest(t)
	dir := t.TempDir()
	res, _ := runDemo(t, nil, "-workspace", dir)
	if res.code != 0 {
		t.Fatalf("want exit 0: %v", res)
	}
	checkTranscript(t, res.stdout)
	checkWorkspace(t, dir)
	// The script really ran: run it again and compare.
	out, err := exec.Command("sh", filepath.Join(dir, "hello.sh"), "Ada").Output()
	if err != nil || string(out) != wantGreeting {
		t.Errorf("hello.sh printed %q (%v), want %q", out, err, wantGreeting)
	}
}

func TestE2E_BaseURL(t *testing.T) {
	binaryTest(t)
	srv := openaitest.NewServer(scriptTurns(t))
	defer srv.Close()
	dir := t.TempDir()
	res, _ := runDemo(t, []string{"DEMO_TEST_KEY=sk-test-123"},
		"-base-url", srv.URL, "-model", "test-model", "-api-key-env", "DEMO_TEST_KEY", "-workspace", dir)
	if res.code != 0 {
		t.Fatalf("want exit 0: %v", res)
	}
	checkTranscript(t, res.stdout)
	if !strings.Contains(res.stdout, "model test-model at "+srv.URL) {
		t.Errorf("the transcript does not name the server:\n%s", res.stdout)
	}
	checkWorkspace(t, dir)

	reqs := srv.Requests()
	if len(reqs) != 4 {
		t.Fatalf("the server got %d requests, want 4", len(reqs))
	}
	for i, h := range srv.Headers() {
		if got := h.Get("Authorization"); got != "Bearer sk-test-123" {
			t.Errorf("request %d: Authorization %q, want the key from $DEMO_TEST_KEY", i, got)
		}
	}
	var model string
	var toolList []struct {
		Function struct{ Name string } `json:"function"`
	}
	if err := json.Unmarshal(reqs[0]["model"], &model); err != nil || model != "test-model" {
		t.Errorf("model %s, want test-model", reqs[0]["model"])
	}
	if err := json.Unmarshal(reqs[0]["tools"], &toolList); err != nil || len(toolList) != 3 {
		t.Errorf("tools %s, want the three workspace tools", reqs[0]["tools"])
	}
	// The last follow-up holds the whole conversation, one tool message
	// per call id, in call order.
	var msgs []struct {
		Role       string `json:"role"`
		ToolCallID string `json:"tool_call_id"`
		ToolCalls  []struct {
			ID string `json:"id"`
		} `json:"tool_calls"`
	}
	if err := json.Unmarshal(reqs[3]["messages"], &msgs); err != nil {
		t.Fatal(err)
	}
	var shape []string
	for _, m := range msgs {
		s := m.Role
		for _, c := range m.ToolCalls {
			s += " " + c.ID
		}
		if m.ToolCallID != "" {
			s += " " + m.ToolCallID
		}
		shape = append(shape, s)
	}
	want := "system|user|assistant call_write|tool call_write|assistant call_run|tool call_run|" +
		"assistant call_read call_list|tool call_read|tool call_list"
	if got := strings.Join(shape, "|"); got != want {
		t.Errorf("last request's messages:\n%s\nwant:\n%s", got, want)
	}
}

func TestE2E_BaseURLWithoutKey(t *testing.T) {
	binaryTest(t)
	srv := openaitest.NewServer(scriptTurns(t))
	defer srv.Close()
	res, _ := runDemo(t, nil, "-base-url", srv.URL, "-api-key-env", "DEMO_TEST_UNSET_KEY")
	if res.code != 2 || !strings.Contains(res.stderr, "demo: -api-key-env DEMO_TEST_UNSET_KEY: that environment variable is unset or empty") {
		t.Errorf("want exit 2 (a usage error) naming the empty variable: %v", res)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("the server got %d requests", n)
	}
}

func TestE2E_ServerFailsEveryAttempt(t *testing.T) {
	binaryTest(t)
	failing := scripted.Turn{Text: "Let me think.", Error: "the model is overloaded"}
	srv := openaitest.NewServer([]scripted.Turn{failing, failing, failing})
	defer srv.Close()
	res, _ := runDemo(t, nil, "-base-url", srv.URL)
	if res.code != 1 {
		t.Fatalf("want exit 1: %v", res)
	}
	if !strings.Contains(res.stderr, "demo: the agent failed: ") || !strings.Contains(res.stderr, "the model is overloaded") {
		t.Errorf("stderr does not say why: %v", res)
	}
	if n := strings.Count(res.stdout, "resume     the answer failed"); n != maxAttempts-1 {
		t.Errorf("%d resends, want %d: %v", n, maxAttempts-1, res)
	}
	if !strings.Contains(res.stdout, "summary    failed · ") {
		t.Errorf("no failed summary: %v", res)
	}
}

func TestE2E_TimeoutStopsAStalledModel(t *testing.T) {
	binaryTest(t)
	srv := openaitest.NewServer([]scripted.Turn{{Text: "Thinking", Stall: true}})
	defer srv.Close()
	res, _ := runDemo(t, nil, "-base-url", srv.URL, "-timeout", "300ms")
	if res.code != 1 || !strings.Contains(res.stderr, "demo: no final answer within -timeout 300ms") {
		t.Errorf("want exit 1 and a timeout message: %v", res)
	}
}

func TestE2E_Crash(t *testing.T) {
	binaryTest(t)
	for _, site := range []string{"tool", "loop", "router", "model"} {
		t.Run(site, func(t *testing.T) {
			dir := t.TempDir()
			res, _ := runDemo(t, nil, "-crash", site, "-workspace", dir)
			if res.code != 0 {
				t.Fatalf("want exit 0 after healing: %v", res)
			}
			checkTranscript(t, res.stdout)
			for _, want := range []string{"fault      panicking in ", "supervisor restarted polyweave/agent", " · 1 restart · "} {
				if !strings.Contains(res.stdout, want) {
					t.Errorf("the transcript lacks %q:\n%s", want, res.stdout)
				}
			}
			checkWorkspace(t, dir)
		})
	}
}

// A model that crashes on every answer cannot heal: the run ends with a
// clear error after its attempts, not a hang.
func TestE2E_CrashThatCannotHeal(t *testing.T) {
	binaryTest(t)
	// With the crash on the first frame of the first answer and a server
	// that fails the two resends, every attempt fails.
	failing := scripted.Turn{Error: "still broken"}
	srv := openaitest.NewServer([]scripted.Turn{{Text: "Hi"}, failing, failing})
	defer srv.Close()
	res, _ := runDemo(t, nil, "-base-url", srv.URL, "-crash", "model:1")
	if res.code != 1 || !strings.Contains(res.stderr, "demo: the agent failed: ") {
		t.Errorf("want exit 1 with the failure: %v", res)
	}
	for _, want := range []string{"fault      panicking in the model adapter emitting TEXT (model frame 1)", "supervisor restarted polyweave/agent/model"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("the transcript lacks %q:\n%s", want, res.stdout)
		}
	}
}

func TestE2E_JSON(t *testing.T) {
	binaryTest(t)
	res, _ := runDemo(t, nil, "-json")
	if res.code != 0 {
		t.Fatalf("want exit 0: %v", res)
	}
	lines := strings.Split(strings.TrimSuffix(res.stdout, "\n"), "\n")
	if len(lines) < 10 {
		t.Fatalf("only %d lines: %v", len(lines), res)
	}
	for i, line := range lines {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("line %d is not JSON: %v\n%s", i+1, err, line)
		}
		if v["type"] == nil || v["streamId"] != "demo" {
			t.Errorf("line %d is not a frame of stream demo: %s", i+1, line)
		}
	}
	if !strings.Contains(lines[len(lines)-1], `"END"`) {
		t.Errorf("the last line is not the END frame: %s", lines[len(lines)-1])
	}
	if !strings.Contains(res.stderr, "summary    ok · ") {
		t.Errorf("the summary is not on stderr: %v", res)
	}
}

func TestE2E_Help(t *testing.T) {
	binaryTest(t)
	res, _ := runDemo(t, nil, "-h")
	if res.code != 0 || !strings.Contains(res.stderr, "Usage: demo [flags]") || !strings.Contains(res.stderr, "-crash") {
		t.Errorf("want exit 0 and the usage: %v", res)
	}
}

func TestE2E_BadFlag(t *testing.T) {
	binaryTest(t)
	for args, want := range map[string]string{
		"-bogus":                        "flag provided but not defined: -bogus",
		"-crash=disk":                   `unknown crash site "disk"`,
		"-timeout=soon":                 `invalid value "soon" for flag -timeout`,
		"-session=abc":                  "demo: -session needs -store",
		"-store=postgres://localhost/x": "only -cluster keeps sessions in PostgreSQL",
	} {
		res, _ := runDemo(t, nil, args)
		if res.code != 2 || !strings.Contains(res.stderr, want) || res.stdout != "" {
			t.Errorf("%s: want exit 2, %q on stderr and nothing on stdout: %v", args, want, res)
		}
		// One line saying what is wrong and where the flags are explained,
		// not the whole usage.
		if lines := strings.Split(strings.TrimSpace(res.stderr), "\n"); len(lines) != 2 || lines[1] != "Run 'demo -h' for the flags." {
			t.Errorf("%s: want the error and a pointer to -h, got:\n%s", args, res.stderr)
		}
	}
}

// A durable session survives the process being killed: the next run with
// the same -session goes on from the last step the first one persisted,
// and a run after the end answers from the store without asking the model.
func TestE2E_SessionSurvivesKill(t *testing.T) {
	binaryTest(t)
	turns := scriptTurns(t)
	dir := t.TempDir()
	store := filepath.Join(dir, "demo.db")
	args := []string{"-store", store, "-session", "s-kill", "-workspace", dir}

	// Run 1: the first round completes; the model stalls in its second
	// answer, and the process is killed there.
	stalled := turns[1]
	stalled.ToolCalls, stalled.Stall = nil, true
	srv1 := openaitest.NewServer([]scripted.Turn{turns[0], stalled})
	defer srv1.Close()
	seen := runDemoUntilKilled(t, stalled.Text, append(args, "-base-url", srv1.URL)...)
	if !strings.Contains(seen, "result     write_file call_write ok") {
		t.Fatalf("the first round did not complete before the kill:\n%s", seen)
	}

	// Run 2: resumes; the model gets the second request again, with the
	// first round in it, and write_file does not run again.
	srv2 := openaitest.NewServer(turns[1:])
	defer srv2.Close()
	res, _ := runDemo(t, nil, append(args, "-base-url", srv2.URL)...)
	if res.code != 0 {
		t.Fatalf("resumed run: want exit 0: %v", res)
	}
	for _, want := range []string{
		"resuming session s-kill from " + store + " after 1 tool round; it stopped while the model was answering",
		"session    resumed after 1 tool round",
		"result     run_command call_run ok",
		"model      Done. hello.sh prints a greeting",
	} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("the resumed run lacks %q:\n%s", want, res.stdout)
		}
	}
	if strings.Contains(res.stdout, "call       write_file") {
		t.Errorf("write_file ran again:\n%s", res.stdout)
	}
	checkWorkspace(t, dir)
	reqs := srv2.Requests()
	if len(reqs) != 3 {
		t.Fatalf("the server got %d requests, want 3", len(reqs))
	}
	if !strings.Contains(string(reqs[0]["messages"]), `"tool_call_id":"call_write"`) {
		t.Errorf("the resumed request lacks the first round: %s", reqs[0]["messages"])
	}

	// Run 3: the session has ended; its answer comes from the store.
	srv3 := openaitest.NewServer(nil)
	defer srv3.Close()
	res, _ = runDemo(t, nil, append(args, "-base-url", srv3.URL)...)
	if res.code != 0 || !strings.Contains(res.stdout, "model      Done. hello.sh prints a greeting") {
		t.Errorf("replay: want exit 0 and the final answer: %v", res)
	}
	if n := len(srv3.Requests()); n != 0 {
		t.Errorf("the replay asked the model %d times", n)
	}
}

// A durable run stopped by -timeout resumes like a killed one.
func TestE2E_SessionResumesAfterTimeout(t *testing.T) {
	binaryTest(t)
	turns := scriptTurns(t)
	dir := t.TempDir()
	args := []string{"-store", filepath.Join(dir, "demo.db"), "-session", "s-timeout", "-workspace", dir}
	stalled := turns[1]
	stalled.ToolCalls, stalled.Stall = nil, true
	srv1 := openaitest.NewServer([]scripted.Turn{turns[0], stalled})
	defer srv1.Close()
	// The timeout leaves time for the first round on a loaded machine.
	res, _ := runDemo(t, nil, append(args, "-base-url", srv1.URL, "-timeout", "2s")...)
	if res.code != 1 || !strings.Contains(res.stderr, "no final answer within -timeout 2s") {
		t.Fatalf("want a timeout: %v", res)
	}
	srv2 := openaitest.NewServer(turns[1:])
	defer srv2.Close()
	res, _ = runDemo(t, nil, append(args, "-base-url", srv2.URL)...)
	if res.code != 0 || !strings.Contains(res.stdout, "session    resumed after 1 tool round") ||
		strings.Contains(res.stdout, "call       write_file") {
		t.Errorf("want the session resumed after its first round: %v", res)
	}
	checkWorkspace(t, dir)
}

func TestE2E_ProviderAnthropic(t *testing.T) {
	binaryTest(t)
	srv := anthropictest.NewServer(scriptTurns(t))
	defer srv.Close()
	dir := t.TempDir()
	res, _ := runDemo(t, []string{"ANTHROPIC_API_KEY=sk-ant-test"},
		"-provider", "anthropic", "-base-url", srv.URL, "-workspace", dir)
	if res.code != 0 {
		t.Fatalf("want exit 0: %v", res)
	}
	checkTranscript(t, res.stdout)
	checkWorkspace(t, dir)
	reqs := srv.Requests()
	if len(reqs) != 4 {
		t.Fatalf("the server got %d requests, want 4", len(reqs))
	}
	if !modeltest.JSONEqual(reqs[0]["model"], []byte(`"claude-sonnet-4-5"`)) {
		t.Errorf("model %s, want the Anthropic default", reqs[0]["model"])
	}
	for i, h := range srv.Headers() {
		if got := h.Get("Authorization"); got != "Bearer sk-ant-test" {
			t.Errorf("request %d: Authorization %q, want the key from $ANTHROPIC_API_KEY", i, got)
		}
	}
	// The last request holds the conversation as Messages API turns: the
	// tool results open the user turns.
	var turns []struct {
		Role    string `json:"role"`
		Content []struct {
			Type string `json:"type"`
		} `json:"content"`
	}
	if err := json.Unmarshal(reqs[3]["messages"], &turns); err != nil {
		t.Fatal(err)
	}
	var shape []string
	for _, m := range turns {
		s := m.Role
		for _, c := range m.Content {
			s += " " + c.Type
		}
		shape = append(shape, s)
	}
	want := "user text|assistant text tool_use|user tool_result|assistant text tool_use|user tool_result|assistant text tool_use tool_use|user tool_result tool_result"
	if got := strings.Join(shape, "|"); got != want {
		t.Errorf("last request's turns:\n%s\nwant:\n%s", got, want)
	}
	if _, ok := reqs[0]["system"]; !ok {
		t.Errorf("no system prompt in %v", reqs[0])
	}
}

// A session killed while a tool call ran resumes with that call answered
// "interrupted" (it is not run again). When the model then answers
// without making the call again, the summary says so instead of "ok".
func TestE2E_ResumeAfterAnInterruptedCallIsNotOK(t *testing.T) {
	binaryTest(t)
	turns := scriptTurns(t)
	dir := t.TempDir()
	store := filepath.Join(dir, "demo.db")
	args := []string{"-store", store, "-session", "s-int", "-workspace", dir}

	// Run 1: the second call runs for a long time; the process is killed
	// while it runs.
	slow := turns[1]
	slow.ToolCalls = []scripted.ToolCall{{ID: "call_run", Name: "run_command", Arguments: `{"command":"sleep 60"}`}}
	srv1 := openaitest.NewServer([]scripted.Turn{turns[0], slow})
	defer srv1.Close()
	runDemoUntilKilled(t, "call       run_command call_run", append(args, "-base-url", srv1.URL)...)

	// Run 2: the call is answered "interrupted"; the model reads the file
	// the call would have written, and answers.
	srv2 := openaitest.NewServer(turns[2:])
	defer srv2.Close()
	res, _ := runDemo(t, nil, append(args, "-base-url", srv2.URL)...)
	if res.code != 0 {
		t.Fatalf("resumed run: want exit 0 (the model answered): %v", res)
	}
	for _, want := range []string{
		"session    resumed after 1 tool round; interrupted (not run again) call_run",
		"result     run_command call_run FAILED (interrupted)",
		// The file the interrupted command would have written is not
		// there: a refused read is a failed call.
		"result     read_file call_read FAILED (not_found)",
		"summary    answered, but run_command call_run (interrupted), read_file call_read (not_found) failed and were never retried · ",
	} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("the resumed run lacks %q:\n%s", want, res.stdout)
		}
	}
	if strings.Contains(res.stdout, "summary    ok") {
		t.Errorf("the summary says ok:\n%s", res.stdout)
	}
}

// -team: the lead delegates to the writer, then the reviewer; their lines
// are indented under the calls that started them.
func TestE2E_Team(t *testing.T) {
	binaryTest(t)
	dir := t.TempDir()
	res, _ := runDemo(t, nil, "-team", "-workspace", dir)
	if res.code != 0 {
		t.Fatalf("want exit 0: %v", res)
	}
	checkWorkspace(t, dir)
	checkTeamTranscript(t, res.stdout)
	if !strings.Contains(res.stdout, "summary    ok · 8 iterations · 6 tool calls (0 failed) · 0 restarts · ") {
		t.Errorf("unexpected summary:\n%s", res.stdout)
	}
}

// -team -base-url: the same team against a server speaking the OpenAI
// wire format; every agent's requests go to it, in delegation order.
func TestE2E_TeamBaseURL(t *testing.T) {
	binaryTest(t)
	scripts := map[string][]scripted.Turn{}
	for _, name := range []string{"lead", "writer", "reviewer"} {
		raw, err := teamScript(name)
		if err != nil {
			t.Fatal(err)
		}
		s, err := loadScript(raw)
		if err != nil {
			t.Fatal(err)
		}
		scripts[name] = s.Turns
	}
	l, w, r := scripts["lead"], scripts["writer"], scripts["reviewer"]
	srv := openaitest.NewServer([]scripted.Turn{l[0], w[0], w[1], w[2], l[1], r[0], r[1], l[2]})
	defer srv.Close()
	dir := t.TempDir()
	res, _ := runDemo(t, nil, "-team", "-base-url", srv.URL, "-workspace", dir)
	if res.code != 0 {
		t.Fatalf("want exit 0: %v", res)
	}
	checkTeamTranscript(t, res.stdout)
	checkWorkspace(t, dir)
	reqs := srv.Requests()
	if len(reqs) != 8 {
		t.Fatalf("the server got %d requests, want 8", len(reqs))
	}
	// Each agent sends its own system prompt and tools: the writer's
	// first request has the workspace tools, the reviewer's read_file only.
	for i, want := range map[int][]string{0: {`"writer"`, `"reviewer"`}, 1: {`"write_file"`, `"run_command"`}, 5: {`"read_file"`}} {
		for _, name := range want {
			if !strings.Contains(string(reqs[i]["tools"]), name) {
				t.Errorf("request %d lacks tool %s: %s", i, name, reqs[i]["tools"])
			}
		}
	}
	if strings.Contains(string(reqs[5]["tools"]), "write_file") {
		t.Errorf("the reviewer was given write_file: %s", reqs[5]["tools"])
	}
}

// A run cut by -timeout while one of two parallel calls runs prints what
// the agent's events say of each: the call that finished ok, the one cut
// cancelled, each once; with -json both TOOL_RESULT frames are printed.
func TestE2E_TimeoutShowsEachResultOnce(t *testing.T) {
	binaryTest(t)
	cut := scripted.Turn{ToolCalls: []scripted.ToolCall{
		{ID: "call_write", Name: "write_file", Arguments: `{"path":"a.txt","content":"a"}`},
		{ID: "call_run", Name: "run_command", Arguments: `{"command":"sleep 30"}`},
	}}
	t.Run("text", func(t *testing.T) {
		srv := openaitest.NewServer([]scripted.Turn{cut})
		defer srv.Close()
		// The timeout leaves time for the write on a loaded machine.
		res, _ := runDemo(t, nil, "-base-url", srv.URL, "-workspace", t.TempDir(), "-timeout", "2s")
		if res.code != 1 || !strings.Contains(res.stderr, "no final answer within -timeout 2s") {
			t.Fatalf("want a timeout: %v", res)
		}
		for _, c := range []struct{ id, want string }{
			{"call_write", "result     write_file call_write ok"},
			{"call_run", "result     run_command call_run FAILED (cancelled)"},
		} {
			if n := strings.Count(res.stdout, "result     "+strings.Fields(c.want)[1]+" "+c.id); n != 1 || !strings.Contains(res.stdout, c.want) {
				t.Errorf("%d result lines for %s, want one %q:\n%s", n, c.id, c.want, res.stdout)
			}
		}
	})
	t.Run("json", func(t *testing.T) {
		srv := openaitest.NewServer([]scripted.Turn{cut})
		defer srv.Close()
		res, _ := runDemo(t, nil, "-base-url", srv.URL, "-workspace", t.TempDir(), "-timeout", "2s", "-json")
		if res.code != 1 {
			t.Fatalf("want a timeout: %v", res)
		}
		results := 0
		for _, line := range strings.Split(strings.TrimSuffix(res.stdout, "\n"), "\n") {
			if strings.Contains(line, `"TOOL_RESULT"`) {
				results++
			}
		}
		if results != 2 {
			t.Errorf("%d TOOL_RESULT frames printed, want 2:\n%s", results, res.stdout)
		}
	})
}
