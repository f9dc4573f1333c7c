package agent_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/boltstore"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/tools/tooltest"
)

// fileLauncher is an irreversible tool that appends its target to
// dir/launched.txt: what ran survives the process.
func fileLauncher(dir string) *tools.Tool {
	return tools.MustNewTyped(tools.Definition{Name: "launch", Capabilities: []string{"execute"}, Irreversible: true},
		func(_ context.Context, in struct {
			Target string `json:"target"`
		}) (map[string]string, error) {
			f, err := os.OpenFile(filepath.Join(dir, "launched.txt"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return nil, err
			}
			_, err = f.WriteString(in.Target + "\n")
			if err = errors.Join(err, f.Sync(), f.Close()); err != nil {
				return nil, err
			}
			return map[string]string{"launched": in.Target}, nil
		})
}

func launched(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "launched.txt"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

func durableScript() scripted.Script {
	return scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
		{Text: "Echo and launch.", ToolCalls: []scripted.ToolCall{
			call("c1", "echo", `{"text":"hi"}`), call("c2", "launch", `{"target":"moon"}`)}},
		{Text: "Done."},
	}}
}

func durableAgent(rt *actors.Runtime, store durability.Store, dir string, opts *tools.ApprovalOptions) (*agent.Agent, error) {
	m, err := scripted.New(durableScript(), nil)
	if err != nil {
		return nil, err
	}
	return agent.New(rt, m.Spec("model"), &agent.Options{Name: "durable", Tools: []*tools.Tool{echo(nil), fileLauncher(dir)},
		Store: store, Approval: opts})
}

// waitInProcess runs the session until it waits for approval, in a
// runtime and store of its own that are closed afterwards (a clean stop).
func waitInProcess(t *testing.T, path, dir string, opts *tools.ApprovalOptions) {
	t.Helper()
	store, err := boltstore.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rt := actorstest.NewRuntime(t, nil)
	a, err := durableAgent(rt, store, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	_, err = a.Run(testCtx(t), "session-1", ask)
	waiting(t, err, "c2")
}

// resumeInProcess opens the store again and resumes with decisions.
func resumeInProcess(t *testing.T, path, dir string, opts *tools.ApprovalOptions, decisions ...tools.ApprovalAnswer) (*agent.Agent, durability.Store) {
	t.Helper()
	store, err := boltstore.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	pending, err := tools.ReadApprovals(store, agent.SessionKey("durable", "session-1"))
	if err != nil || len(pending) != 1 || pending[0].ToolCallID != "c2" || pending[0].Tool != "launch" {
		t.Fatalf("stored approvals %+v, %v", pending, err)
	}
	rt := actorstest.NewRuntime(t, nil)
	a, err := durableAgent(rt, store, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	return a, store
}

// TestApprovalDurable_ApproveAfterRestart: the approval given to a new
// process runs the call once; running the session again answers from the
// store without running it again.
func TestApprovalDurable_ApproveAfterRestart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sessions.db")
	waitInProcess(t, path, dir, &tools.ApprovalOptions{})
	if got := launched(t, dir); got != "" {
		t.Fatalf("launched before the approval: %q", got)
	}
	a, store := resumeInProcess(t, path, dir, &tools.ApprovalOptions{})
	ans, err := a.Resume(testCtx(t), "session-1", ask, agent.Approve("c2"))
	if err != nil {
		t.Fatal(err)
	}
	if r := resultOf(t, ans, "c2"); ans.Text != "Done." || r.IsError || launched(t, dir) != "moon\n" {
		t.Fatalf("answer %q, result %+v, launched %q", ans.Text, r, launched(t, dir))
	}
	if pending, err := tools.ReadApprovals(store, agent.SessionKey("durable", "session-1")); err != nil || len(pending) != 0 {
		t.Fatalf("approvals left: %+v %v", pending, err)
	}
	ans, err = a.Run(testCtx(t), "session-1", ask)
	if err != nil || ans.Text != "Done." || launched(t, dir) != "moon\n" {
		t.Fatalf("run again: %v %q, launched %q", err, ans.Text, launched(t, dir))
	}
}

// TestApprovalDurable_DenyAfterRestart: a denial given to a new process
// answers the call as denied; it never runs.
func TestApprovalDurable_DenyAfterRestart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sessions.db")
	waitInProcess(t, path, dir, &tools.ApprovalOptions{})
	a, _ := resumeInProcess(t, path, dir, &tools.ApprovalOptions{})
	// A Run without decisions waits again.
	_, err := a.Run(testCtx(t), "session-1", ask)
	waiting(t, err, "c2")
	ans, err := a.Resume(testCtx(t), "session-1", ask, agent.Deny("c2", "the moon is closed"))
	if err != nil {
		t.Fatal(err)
	}
	r := resultOf(t, ans, "c2")
	if ans.Text != "Done." || !r.IsError || r.FailureKind != string(tools.FailureDenied) ||
		!strings.Contains(string(r.Content), "the moon is closed") || launched(t, dir) != "" {
		t.Fatalf("answer %q, result %+v, launched %q", ans.Text, r, launched(t, dir))
	}
}

// TestApprovalDurable_DeadlinePassed: a call whose deadline passed while
// nothing ran is denied when the session is resumed.
func TestApprovalDurable_DeadlinePassed(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sessions.db")
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func(at time.Time) func() time.Time { return func() time.Time { return at } }
	waitInProcess(t, path, dir, &tools.ApprovalOptions{Deadline: time.Hour, Now: clock(start)})
	a, _ := resumeInProcess(t, path, dir, &tools.ApprovalOptions{Deadline: time.Hour, Now: clock(start.Add(61 * time.Minute))})
	ans, err := a.Run(testCtx(t), "session-1", ask)
	if err != nil {
		t.Fatal(err)
	}
	r := resultOf(t, ans, "c2")
	if ans.Text != "Done." || r.FailureKind != string(tools.FailureDenied) || !strings.Contains(string(r.Content), "no approval came within 1h0m0s") ||
		launched(t, dir) != "" {
		t.Fatalf("answer %q, result %+v, launched %q", ans.Text, r, launched(t, dir))
	}
}

// TestApprovalDeadline_Live: the deadline's timer denies a call while
// the loop runs.
func TestApprovalDeadline_Live(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	l := newLauncher()
	a := newAgent(t, rt, approvalScript(t).Spec("model"), &agent.Options{Tools: []*tools.Tool{echo(nil), l.tool()},
		Approval: &tools.ApprovalOptions{Deadline: 10 * time.Millisecond}})
	// Stream the conversation: the deadline passes while it is read.
	var required int
	var final string
	for ev, err := range a.Stream(testCtx(t), "s1", ask) {
		var w *agent.WaitingError
		if errors.As(err, &w) {
			// The wait was seen before the deadline: answer late. The
			// decision is ignored if the deadline passed first.
			ans, err := a.Resume(testCtx(t), "s1", ask)
			if err != nil {
				t.Fatal(err)
			}
			final = ans.Text
			if r := resultOf(t, ans, "c2"); r.FailureKind != string(tools.FailureDenied) {
				t.Fatalf("result %+v", r)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ev.Frame != nil && ev.Frame.GetName() == tools.MetaApprovalRequired {
			required++
		}
		if ev.Kind == agent.EventDone {
			final = ev.Answer.Text
		}
	}
	if final != "Done." || required != 1 || l.runs.Load() != 0 {
		t.Fatalf("final %q, %d approval requests, %d launches", final, required, l.runs.Load())
	}
}

// The process-kill test runs the session in a child process (this test
// binary again, running TestApprovalKillChild), which marks on file
// descriptor 3 that the call waits for approval and blocks on stdin until
// the parent SIGKILLs it.
const approvalKillDirEnv = "POLYWEAVE_APPROVAL_KILL_DIR"

func TestApprovalKillChild(t *testing.T) {
	dir := os.Getenv(approvalKillDirEnv)
	if dir == "" {
		return
	}
	if err := runApprovalChild(dir); err != nil {
		t.Fatal(err)
	}
}

func runApprovalChild(dir string) error {
	store, err := boltstore.Open(filepath.Join(dir, "sessions.db"), nil)
	if err != nil {
		return err
	}
	rt, err := actors.NewRuntime(nil)
	if err != nil {
		return err
	}
	a, err := durableAgent(rt, store, dir, &tools.ApprovalOptions{})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for ev, err := range a.Stream(ctx, "session-1", ask) {
		if err != nil {
			return err
		}
		if ev.Frame != nil && ev.Frame.GetName() == tools.MetaApprovalRequired {
			fmt.Fprintln(os.NewFile(3, "marker"), "waiting")
			io.Copy(io.Discard, os.Stdin) // blocks until the parent kills us
			os.Exit(3)
		}
	}
	return errors.New("the session ended without asking")
}

// killWaitingChild runs the child until the call waits, and SIGKILLs it.
func killWaitingChild(t *testing.T, dir string) {
	t.Helper()
	c := tooltest.StartChild(t, "^TestApprovalKillChild$", approvalKillDirEnv+"="+dir)
	if got := c.Mark(t); got != "waiting" {
		c.Kill(t)
		t.Fatalf("child: marker %q, want waiting", got)
	}
	c.Kill(t)
}

// TestApprovalDurable_ProcessKill: a process killed (SIGKILL) while a
// call waits for approval; a new process gives the answer: approved, the
// call runs exactly once; denied, it never runs.
func TestApprovalDurable_ProcessKill(t *testing.T) {
	for _, tc := range []struct {
		name     string
		decision tools.ApprovalAnswer
		launched string
	}{
		{"approve", agent.Approve("c2"), "moon\n"},
		{"deny", agent.Deny("c2", "no"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			killWaitingChild(t, dir)
			if got := launched(t, dir); got != "" {
				t.Fatalf("launched before the answer: %q", got)
			}
			a, _ := resumeInProcess(t, filepath.Join(dir, "sessions.db"), dir, &tools.ApprovalOptions{})
			ans, err := a.Resume(testCtx(t), "session-1", ask, tc.decision)
			if err != nil {
				t.Fatal(err)
			}
			if r := resultOf(t, ans, "c2"); ans.Text != "Done." || launched(t, dir) != tc.launched || r.IsError == (tc.launched != "") {
				t.Fatalf("answer %q, result %+v, launched %q", ans.Text, r, launched(t, dir))
			}
			// Once more: the stored session answers; nothing runs again.
			ans, err = a.Run(testCtx(t), "session-1", ask)
			if err != nil || ans.Text != "Done." || launched(t, dir) != tc.launched {
				t.Fatalf("run again: %v %q, launched %q", err, ans.Text, launched(t, dir))
			}
		})
	}
}
