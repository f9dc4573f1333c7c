//go:build !race

// Runs the demo binary: left out under the race detector (see e2e_test.go).

package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// runDemoInput runs the built demo with stdin as its input (a pipe, as a
// person typing answers would give them).
func runDemoInput(t *testing.T, stdin string, args ...string) processResult {
	t.Helper()
	res, _ := runDemoStdin(t, nil, strings.NewReader(stdin), args...)
	return res
}

func fileText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "<none>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestE2E_ApproveAsk: -approve ask prompts for run_command on the
// terminal; n denies it (the model goes on), y runs it, e runs it with
// the arguments typed next.
func TestE2E_ApproveAsk(t *testing.T) {
	binaryTest(t)
	for _, tc := range []struct {
		name, input string
		greeting    string // greeting.txt afterwards
		extra       string // a file the edited command makes
		transcript  []string
	}{
		{"deny", "n\n", "<none>", "", []string{"run it? [y]es / [n]o / [e]dit", "FAILED (denied)", "denied at the terminal"}},
		{"approve", "y\n", "Hello, Ada! Greetings from a Polyweave workspace.\n", "", []string{"run it?", "result     run_command call_run ok",
			// The command asked about as the model wrote it.
			`approve    run_command call_run {"command":"sh hello.sh Ada > greeting.txt && cat greeting.txt"}`}},
		{"edit", "what?\ne\n{\"command\":\"echo edited > edited.txt\"}\n", "<none>", "edited\n", []string{"answer y, n or e", "new arguments for run_command"}},
		{"no input", "", "<none>", "", []string{"no answer (input ended)", "FAILED (denied)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			res := runDemoInput(t, tc.input, "-approve", "ask", "-workspace", dir)
			if res.code != 0 {
				t.Fatalf("want exit 0: %v", res)
			}
			for _, want := range tc.transcript {
				if !strings.Contains(res.stdout, want) {
					t.Errorf("transcript lacks %q:\n%s", want, res.stdout)
				}
			}
			if n := strings.Count(res.stdout, "run it?"); n != 1+strings.Count(tc.input, "what?") {
				t.Errorf("asked %d times:\n%s", n, res.stdout)
			}
			if got := fileText(t, filepath.Join(dir, "greeting.txt")); got != tc.greeting {
				t.Errorf("greeting.txt %q, want %q", got, tc.greeting)
			}
			if tc.extra != "" && fileText(t, filepath.Join(dir, "edited.txt")) != tc.extra {
				t.Errorf("edited.txt %q", fileText(t, filepath.Join(dir, "edited.txt")))
			}
			if !strings.Contains(res.stdout, "Done.") {
				t.Errorf("no final answer:\n%s", res.stdout)
			}
		})
	}
}

// TestE2E_ApproveDenyAndUndo: -approve deny answers run_command as denied
// without asking; -undo restores the file write_file overwrote.
func TestE2E_ApproveDenyAndUndo(t *testing.T) {
	binaryTest(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.sh"), []byte("echo old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := runDemoInput(t, "", "-approve", "deny", "-undo", "-workspace", dir)
	if res.code != 0 {
		t.Fatalf("want exit 0: %v", res)
	}
	for _, want := range []string{"FAILED (denied)", "does not allow irreversible actions", "undo       restored hello.sh as it was before call_write"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("transcript lacks %q:\n%s", want, res.stdout)
		}
	}
	if strings.Contains(res.stdout, "run it?") {
		t.Errorf("asked with -approve deny:\n%s", res.stdout)
	}
	if got := fileText(t, filepath.Join(dir, "hello.sh")); got != "echo old\n" {
		t.Errorf("hello.sh after -undo: %q", got)
	}
	if got := fileText(t, filepath.Join(dir, "greeting.txt")); got != "<none>" {
		t.Errorf("greeting.txt %q: the denied command ran", got)
	}
}

// TestE2E_ApproveAskDurable: with -store the run stops its loop while it
// waits (the held call is in the store), resumes with the answer, and
// -undo restores from the session's journal in the same store.
func TestE2E_ApproveAskDurable(t *testing.T) {
	binaryTest(t)
	dir := t.TempDir()
	res := runDemoInput(t, "y\n", "-approve", "ask", "-undo", "-store", filepath.Join(dir, "s.db"), "-workspace", dir)
	if res.code != 0 {
		t.Fatalf("want exit 0: %v", res)
	}
	for _, want := range []string{"session    resumed after 1 tool round; goes on with the answer given to call_run",
		"call       run_command call_run", "result     run_command call_run ok", "undo       removed hello.sh (created by call_write)"} {
		if n := strings.Count(res.stdout, want); n != 1 {
			t.Errorf("transcript has %q %d times, want once:\n%s", want, n, res.stdout)
		}
	}
	if fileText(t, filepath.Join(dir, "hello.sh")) != "<none>" || fileText(t, filepath.Join(dir, "greeting.txt")) == "<none>" {
		t.Errorf("hello.sh should be undone and greeting.txt (the command's) kept:\n%s", res.stdout)
	}
}

// TestE2E_ApproveAskInterrupted: Ctrl-C at the approval prompt ends the
// run at once (exit 1, the call cancelled, the temporary workspace
// removed), though nobody answered and the input stays open.
func TestE2E_ApproveAskInterrupted(t *testing.T) {
	binaryTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), demoProcessLimit)
	defer cancel()
	tmp := t.TempDir()
	cmd := exec.CommandContext(ctx, demoBin, "-approve", "ask")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	stdin, err := cmd.StdinPipe() // held open, never written: a person who does not answer
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	out := newSyncBuffer()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := out.waitFor(ctx, regexp.MustCompile(`(run it\?)`)); err != nil {
		t.Fatalf("no prompt: %v\n%s", err, out)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("the demo did not end after Ctrl-C at the prompt:\n%s", out)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("want exit 1 after an interrupted run, got %v:\n%s", err, out)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("the temporary workspace was left behind: %v", left)
	}
}
