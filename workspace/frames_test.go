package workspace_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/workspace"
)

// "<", ">" and "&" reach the model as themselves in the result frames of
// the three tools, not as \u003c escapes.
func TestFrames_NoHTMLEscaping(t *testing.T) {
	dir := t.TempDir()
	rt := actorstest.NewRuntime(t, nil)
	_, j := newJournal(t, dir, memstore.New(nil))
	jt := startJournal(t, rt, j)
	const text = "<b>a && b</b>"
	if err := os.WriteFile(filepath.Join(dir, "a.html"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	results := map[string]string{
		"read_file":  jt.call("s1", "c1", workspace.ReadFileToolName, `{"path":"a.html"}`),
		"write_file": jt.call("s1", "c2", workspace.WriteFileToolName, `{"path":"<b>&.txt","content":"x"}`),
	}
	if runtime.GOOS != "windows" {
		results["run_command"] = jt.call("s1", "c3", workspace.RunCommandToolName, `{"command":"cat a.html"}`)
	}
	want := map[string]string{"read_file": text, "write_file": "<b>&.txt", "run_command": text}
	for tool, got := range results {
		if !strings.Contains(got, want[tool]) || strings.Contains(got, `\u00`) {
			t.Errorf("%s result = %s, want %q as it is", tool, got, want[tool])
		}
	}
}

// A refused or failed workspace call is an error result of the call,
// with a failure kind, and the model reads the tool's own JSON; a
// command that ran is not one, whatever its exit code. A read of a file
// that is not there (a missing file, a link to one) is of kind
// not_found: its arguments were valid.
func TestFrames_FailuresAreErrorResults(t *testing.T) {
	dir := t.TempDir()
	rt := actorstest.NewRuntime(t, nil)
	_, j := newJournal(t, dir, memstore.New(nil))
	jt := startJournal(t, rt, j)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(dir, "link.txt")); err != nil {
		t.Skipf("no symbolic links here: %v", err)
	}
	if err := os.Symlink("nowhere.txt", filepath.Join(dir, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		tool, args string
		kind       tools.FailureKind // "" for a successful result
		payload    []string          // what the payload holds
	}{
		{workspace.ReadFileToolName, `{"path":"link.txt"}`, tools.FailureInvalidArguments,
			[]string{`"success":false`, `"path":"link.txt"`, "escapes the workspace root"}},
		{workspace.ReadFileToolName, `{"path":"missing.txt"}`, tools.FailureNotFound,
			[]string{`"success":false`, `"path":"missing.txt"`, "no such file"}},
		{workspace.ReadFileToolName, `{"path":"gone.txt"}`, tools.FailureNotFound,
			[]string{`"success":false`, `"path":"gone.txt"`, "target does not exist"}},
		{workspace.WriteFileToolName, `{"path":"../x.txt","content":"x"}`, tools.FailureInvalidArguments,
			[]string{`{"success":false,"error":`, "escapes the workspace root"}},
		{workspace.RunCommandToolName, `{"command":"  "}`, tools.FailureInvalidArguments,
			[]string{`{"success":false,"error":"run_command: empty command"}`}},
		{workspace.ReadFileToolName, `{"path":"."}`, "", []string{`"success":true`}},
		{workspace.WriteFileToolName, `{"path":"ok.txt","content":"x"}`, "", []string{`"success":true`}},
	}
	if runtime.GOOS != "windows" {
		cases = append(cases, struct {
			tool, args string
			kind       tools.FailureKind
			payload    []string
		}{workspace.RunCommandToolName, `{"command":"exit 3"}`, "", []string{`"success":true`, `"exitCode":3`}})
	}
	for i, c := range cases {
		f := jt.frame("s1", "c"+strconv.Itoa(i), c.tool, c.args)
		if f.IsErrorResult() != (c.kind != "") || tools.KindOf(f) != c.kind {
			t.Errorf("%s %s: error result %v kind %q, want kind %q", c.tool, c.args, f.IsErrorResult(), tools.KindOf(f), c.kind)
		}
		for _, want := range c.payload {
			if !strings.Contains(string(f.GetPayload()), want) {
				t.Errorf("%s %s: payload %s, want it to hold %s", c.tool, c.args, f.GetPayload(), want)
			}
		}
	}
}
